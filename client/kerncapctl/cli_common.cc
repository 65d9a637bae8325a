// The parts of the command line every group shares: help footers, value
// validators, command suggestions and resolving the connection.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "client/kerncapctl/args.h"
#include "client/kerncapctl/cli.h"
#include "client/kerncapctl/context_config.h"
#include "common/status_macros.h"

namespace kerncap::ctl {

void SetCommandHelp(CLI::App* sub, Uses uses, const std::vector<std::string>& examples,
                    const std::string& notes) {
  std::string text;
  if (!notes.empty()) absl::StrAppend(&text, "\n", notes, "\n");
  absl::StrAppend(&text, "\nGlobal options (before or after the command):\n");
  absl::StrAppend(&text,
                  "  -o, --output FORMAT  table (default), wide, json, yaml, name; --json = -o json\n"
                  "  -q, --quiet          ids only, one per line\n"
                  "  --no-headers         tables without their header row\n");
  if (uses != Uses::kNone) {
    absl::StrAppend(
        &text,
        "  --context NAME       a context from the contexts file (kerncapctl help contexts)\n"
        "  --socket PATH        kerncapd's Unix socket. Which daemon: --socket, --host or\n"
        "                       $KERNCAP_SOCKET; else --context or the current context; else\n"
        "                       your own kerncapd's socket if it runs; else the node's system\n"
        "                       daemon (/run/kerncap/kerncapd.sock, group kerncap)\n"
        "  --host HOST:PORT     a remote kerncapd over TLS, with --tls-ca, --tls-cert/--tls-key,\n"
        "                       --token-file; --insecure for daemons with --insecure-tcp\n"
        "  --timeout SECONDS    deadline of each call (default 30; 0: none)\n");
  }
  if (!examples.empty()) {
    absl::StrAppend(&text, "\nExamples:\n");
    for (const std::string& e : examples) absl::StrAppend(&text, "  ", e, "\n");
  }
  absl::StrAppend(&text, "\nExit codes: kerncapctl help exit-codes\n");
  sub->footer(text);
}

CLI::Validator DurationValue() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        absl::StatusOr<absl::Duration> d = ParseDuration(value);
        return d.ok() ? "" : std::string(d.status().message());
      },
      "");
}

CLI::Validator TimePointValue() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        // No flag name: CLI11 puts the option's name before the message.
        absl::StatusOr<absl::Time> t = ParseTimePoint(value, absl::Now(), "");
        return t.ok() ? "" : std::string(t.status().message());
      },
      "");
}

std::string NearestCommand(const std::string& word, const std::vector<std::string>& candidates) {
  auto distance = [](const std::string& a, const std::string& b) {
    // Damerau-Levenshtein (optimal string alignment): a swap is one edit.
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      for (size_t j = 1; j <= b.size(); ++j) {
        size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
          d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
      }
    }
    return d[a.size()][b.size()];
  };
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const std::string& c : candidates) {
    size_t dist = distance(word, c);
    // A prefix of a command ("capt") is as good as a near miss.
    if (word.size() >= 2 && c.compare(0, word.size(), word) == 0) dist = 1;
    if (dist < best_d) {
      best_d = dist;
      best = c;
    }
  }
  const size_t limit = std::max<size_t>(2, word.size() / 3);
  return best_d <= limit ? best : "";
}

namespace {

absl::Status ApplyContext(GlobalOptions& g) {
  KC_ASSIGN_OR_RETURN(ContextConfig cfg, LoadContextConfig(g.config_path));
  std::string name = g.context.empty() ? cfg.current : g.context;
  if (name.empty()) return absl::OkStatus();
  const Context* ctx = cfg.Find(name);
  if (ctx == nullptr) {
    std::vector<std::string> names;
    for (const Context& c : cfg.contexts) names.push_back(c.name);
    return absl::NotFoundError(absl::StrCat(
        "no context \"", name, "\" in ", g.config_path,
        names.empty() ? std::string(" (it defines none; see kerncapctl config set-context)")
                      : absl::StrCat(" (defined: ", absl::StrJoin(names, ", "), ")")));
  }
  // --socket, --host and $KERNCAP_SOCKET each name a daemon on purpose and
  // beat the current context (an `rm` meant for this node must not go to the
  // context's); --context beats $KERNCAP_SOCKET, being on this command line.
  bool endpoint_given = false;
  for (CLI::Option* o : g.endpoint_flags) endpoint_given = endpoint_given || o->count() > 0;
  const char* env_socket = std::getenv("KERNCAP_SOCKET");
  if (g.context.empty() && env_socket != nullptr && env_socket[0] != '\0') endpoint_given = true;
  if (!endpoint_given) {
    if (!ctx->host.empty()) g.conn.host = ctx->host;
    if (!ctx->socket.empty()) g.conn.socket = ctx->socket;
  }
  auto take = [](CLI::Option* flag, std::string* field, const std::string& v) {
    if (flag->count() == 0 && !v.empty()) *field = v;
  };
  take(g.tls_ca, &g.conn.tls_ca, ctx->tls_ca);
  take(g.tls_cert, &g.conn.tls_cert, ctx->tls_cert);
  take(g.tls_key, &g.conn.tls_key, ctx->tls_key);
  take(g.token_file, &g.conn.token_file, ctx->token_file);
  if (g.insecure->count() == 0 && ctx->insecure) g.conn.insecure = true;
  return absl::OkStatus();
}

// A relative --socket (or a context's socket) names a path under the current
// directory, as every other path argument does; gRPC and the checks before
// connecting want it absolute ("ctl.sock" alone would read as a host name).
absl::Status AbsoluteSocketPath(std::string& socket) {
  absl::string_view path = socket;
  absl::ConsumePrefix(&path, "unix:");
  if (path.empty() || path[0] == '/') return absl::OkStatus();
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(std::filesystem::path(std::string(path)), ec);
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat("--socket ", socket,
                                                   ": cannot resolve it against the current "
                                                   "directory: ", ec.message()));
  }
  socket = abs.lexically_normal().string();
  return absl::OkStatus();
}

}  // namespace

absl::Status ResolveConnection(GlobalOptions& g) {
  KC_RETURN_IF_ERROR(ApplyContext(g));
  return AbsoluteSocketPath(g.conn.socket);
}

}  // namespace kerncap::ctl
