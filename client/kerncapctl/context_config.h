// context_config.h: kerncapctl's contexts, named ways to reach a kerncapd
// (a remote node with its TLS files and token), kept in
// $XDG_CONFIG_HOME/kerncap/config.toml (common/control/default_paths.h):
//
//   current-context = "node17"
//
//   [contexts.node17]
//   host = "node17:7443"          # or: socket = "/run/kerncap/kerncapd.sock"
//   tls-ca = "/home/ann/kerncap/ca.pem"
//   tls-cert = "..."              # mutual TLS, with tls-key
//   tls-key = "..."
//   token-file = "/home/ann/kerncap/node17.token"
//   insecure = false              # plaintext TCP (daemons with --insecure-tcp)
//
// Keys are kerncapctl's long option names. Debian ships no maintained C++
// TOML library (cpptoml is archived upstream), so this reads a strict subset
// of TOML: comments, `key = "string"` / `key = true|false`, and
// `[contexts.NAME]` tables (NAME bare [A-Za-z0-9_-] or "quoted"). Anything
// else is an error naming the file, the line and what was expected, never
// silently ignored. Relative paths are relative to the file's folder.
#ifndef KERNCAP_CLIENT_KERNCAPCTL_CONTEXT_CONFIG_H_
#define KERNCAP_CLIENT_KERNCAPCTL_CONTEXT_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kerncap::ctl {

struct Context {
  std::string name;
  std::string host;  // HOST:PORT
  std::string socket;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string token_file;
  bool insecure = false;
};

struct ContextConfig {
  std::string current;  // current-context; "" when none
  std::vector<Context> contexts;

  const Context* Find(absl::string_view name) const;
  Context* Find(absl::string_view name);
};

// `file` names the file in errors; `dir` resolves relative paths.
absl::StatusOr<ContextConfig> ParseContextConfig(absl::string_view text, absl::string_view file,
                                                 absl::string_view dir);
// The file's text (canonical form: what ParseContextConfig reads back).
std::string FormatContextConfig(const ContextConfig& config);

// A missing file is an empty config; an unreadable or malformed one an error.
absl::StatusOr<ContextConfig> LoadContextConfig(const std::string& path);
// Written atomically, mode 0600 (it names credentials), folders 0700.
absl::Status SaveContextConfig(const std::string& path, const ContextConfig& config);

}  // namespace kerncap::ctl

#endif  // KERNCAP_CLIENT_KERNCAPCTL_CONTEXT_CONFIG_H_
