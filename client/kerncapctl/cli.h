// cli.h: kerncapctl's command line. main.cc builds one Cli, each command group
// (cli_*.cc) adds its subcommands to it, and the chosen subcommand leaves
// behind what to run once parsing is done and the connection is resolved
// (flags > --context > current-context > defaults).
#ifndef KERNCAP_CLIENT_KERNCAPCTL_CLI_H_
#define KERNCAP_CLIENT_KERNCAPCTL_CLI_H_

#include <functional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/kerncapctl/connection.h"
#include "client/kerncapctl/output.h"
#include "common/cli_values.h"

namespace kerncap::ctl {

struct GlobalOptions {
  ConnectionOptions conn;
  std::string output = "table";
  bool json = false;  // --json: the same as -o json
  bool quiet = false;
  bool no_headers = false;
  std::string sort_by;      // --sort-by=FIELD
  std::string context;      // --context=NAME
  std::string config_path;  // the contexts file (DefaultClientConfigPath)
  // Which connection flags were given (they beat the context).
  std::vector<CLI::Option*> endpoint_flags;  // --socket, --host
  CLI::Option* tls_ca = nullptr;
  CLI::Option* tls_cert = nullptr;
  CLI::Option* tls_key = nullptr;
  CLI::Option* token_file = nullptr;
  CLI::Option* insecure = nullptr;
};

struct Cli {
  CLI::App app{"kerncapctl: control kerncapd — arm kernel captures, list and inspect them, "
               "move them between stores, replay them.",
               "kerncapctl"};
  GlobalOptions g;
  // Set by the chosen subcommand's callback; exactly one of them.
  // remote: needs a connection to kerncapd (opened after parsing).
  std::function<absl::Status(Connection&, Output)> remote;
  // local: runs without kerncapd or opens its own connections from g.conn;
  // returns the exit code.
  std::function<absl::StatusOr<int>(Output)> local;
  // False for commands that never reach a daemon (config, help, completion):
  // the contexts file is then not applied (a broken one can still be fixed).
  bool resolve_connection = true;
  // Only replay/validate/bench take unrecognised arguments (passed through to
  // kerncap-replay); they are here after parsing.
  bool accepts_extras = false;
  // Set by list commands (captures, agents, arms, substitutions), the ones
  // --sort-by applies to.
  bool sortable = false;
  std::vector<std::string> extras;
};

// The command groups.
void AddDaemonCommands(Cli& cli);    // status, agents, version, watch
void AddArmCommands(Cli& cli);       // arm, disarm, arms
void AddCaptureCommands(Cli& cli);   // captures, show, rm, gc, verify
void AddTransferCommands(Cli& cli);  // import, export, pull, repro
void AddReplayCommands(Cli& cli);    // replay, validate, bench (kerncap-replay)
void AddSubstituteCommands(Cli& cli);  // substitute, unsubstitute, substitutions
void AddConfigCommands(Cli& cli);    // config get-contexts|use-context|set-context|...
void AddHelpCommands(Cli& cli);      // help TOPIC, completion SHELL

// Which global options a command uses, for its --help footer.
enum class Uses { kDaemon, kDaemonOptional, kNone };
// Sets `sub`'s footer: the global options that apply and a few examples
// (commands without the binary's path).
void SetCommandHelp(CLI::App* sub, Uses uses, const std::vector<std::string>& examples,
                    const std::string& notes = "");

// Validators that tell a type error ("expected a whole number") from a range
// error ("must be 0 or more"), naming what was given (common/cli_values.h,
// shared with kerncapd).
using cli::Number;
using cli::WholeNumber;
// A duration (ParseDuration: 30s, 5m, 2d, 90) and a point in time
// (ParseTimePoint: 2h ago, a date, RFC 3339), checked while parsing, so a bad
// value is a usage error naming its option before any daemon is reached.
CLI::Validator DurationValue();
CLI::Validator TimePointValue();

// "captrues" -> "captures": the nearest of `candidates` by edit distance, or
// "" when none is close.
std::string NearestCommand(const std::string& word, const std::vector<std::string>& candidates);

// Applies the contexts file and --context to g.conn (explicit flags win).
absl::Status ResolveConnection(GlobalOptions& g);

}  // namespace kerncap::ctl

#endif  // KERNCAP_CLIENT_KERNCAPCTL_CLI_H_
