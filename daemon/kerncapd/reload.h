// reload.h: what a SIGHUP may change in a running kerncapd, decided apart
// from the daemon so that every weakening path is tested on its own.
//
// A reload re-parses the command line and the config file and then either
// applies all of what it may change (log level, the bearer token) or nothing:
//   - a config that does not parse (unknown keys, garbage lines, bad values,
//     a missing file) is refused as a whole;
//   - a token file that cannot be read, is empty, holds non-printable bytes
//     or reads as a truncated copy of the running token (a proper prefix of
//     it: a file caught mid-write) is refused as a whole;
//   - a config that names no token file while a token is in force is refused
//     as a whole: a reload never turns the token off. Only a restart without
//     --token-file does, and at start TCP+TLS without a token or client
//     certificates is refused unless --allow-unauthenticated-tls says so.
// Settings a reload cannot change (listener, TLS files, store, sockets, ring
// sizes) are named in the result when they differ, so the log says that they
// wait for a restart instead of pretending they took effect.
#ifndef KERNCAP_DAEMON_KERNCAPD_RELOAD_H_
#define KERNCAP_DAEMON_KERNCAPD_RELOAD_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/kerncapd/daemon_config.h"

namespace kerncap::kerncapd {

struct ReloadPlan {
  bool refused = false;
  std::string reason;  // why it was refused (refused) or a note (applied)
  log::Level log_level = log::Level::kInfo;
  std::string log_level_name;
  // The token to put in force; nullopt: leave the running token as it is.
  std::optional<std::string> token;
  // "none" (no token before or after), "unchanged", "replaced", "added".
  std::string token_state;
  // Long option names whose new values need a restart.
  std::vector<std::string> restart_needed;
};

using TokenReader = std::function<absl::StatusOr<std::string>(const std::string& path)>;

// `running`: the settings kerncapd started with; `running_token`: the token
// in force ("" for none); `parsed`: ParseDaemonConfig of the same argv now;
// `parse_error`: what it wrote to its error stream.
ReloadPlan PlanReload(const DaemonConfig& running, const std::string& running_token,
                      const ParseOutcome& parsed, const std::string& parse_error,
                      const TokenReader& read_token);

}  // namespace kerncap::kerncapd

#endif  // KERNCAP_DAEMON_KERNCAPD_RELOAD_H_
