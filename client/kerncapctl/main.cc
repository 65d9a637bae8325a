// kerncapctl: command-line client of kerncapd (kerncapctl help). This file
// sets up the global options, lets each command group (cli_*.cc) add its
// commands, and turns the outcome into one exit code (common/exit_codes.h).
#include <grpc/support/log.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/kerncapctl/cli.h"
#include "client/kerncapctl/cli_cluster.h"
#include "common/control/default_paths.h"
#include "common/exit_codes.h"
#include "common/json_policy.h"
#include "common/version.h"

namespace kerncap::ctl {
namespace {

constexpr char kFooter[] = R"(
Examples:
  kerncapctl status                               daemon, store and agent summary
  kerncapctl arm --kernel=matmul --count=1        capture the next matmul dispatch
  kerncapctl captures --since=1h                  list captures (newest first)
  kerncapctl show cap-7f3a                        details, memory map, sizes, dedup
  kerncapctl repro cap-7f3a --out ./matmul        reproducer project; then: make -C matmul help
  kerncapctl validate cap-7f3a                    replay on this GPU, compare with the capture
  kerncapctl --context=node17 captures -o json    a remote node (kerncapctl help contexts)

Help: kerncapctl COMMAND --help, and topics: kerncapctl help selectors | exit-codes | json |
output | contexts. Shell completion: kerncapctl completion bash|zsh|fish.
)";

// Global options that take a value, to find the command word in argv.
bool TakesValue(const std::string& arg) {
  for (const char* o : {"--socket", "--host", "--tls-ca", "--tls-cert", "--tls-key",
                        "--token-file", "--timeout", "-o", "--output", "--context", "--sort-by"}) {
    if (arg == o) return true;
  }
  return false;
}

// Fails for a command word that is not a command (before CLI11 would take it
// as an extra argument), suggesting the nearest command.
int CheckVerb(const Cli& cli, int argc, char** argv, bool json) {
  std::vector<std::string> names;
  for (const CLI::App* sub : cli.app.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") return -1;
    if (!a.empty() && a[0] == '-') {
      if (TakesValue(a)) ++i;
      continue;
    }
    for (const std::string& n : names) {
      if (n == a) return -1;
    }
    std::string near = NearestCommand(a, names);
    absl::Status s = absl::InvalidArgumentError(absl::StrCat(
        "unknown command \"", a, "\"",
        near.empty() ? std::string() : absl::StrCat("; did you mean \"", near, "\"?"),
        " (kerncapctl --help lists the commands)"));
    if (json) {
      json_policy::WriteError(std::cerr, s, exit_code::kUsage);
    } else {
      std::cerr << "kerncapctl: " << s.message() << std::endl;
    }
    return exit_code::kUsage;
  }
  return -1;
}

// Fails for a --flag that neither the chosen command nor the global options
// know, suggesting the nearest one, before CLI11 parses: it would otherwise
// report a required option as missing ("--kernel is required" for
// --kernal) or keep the flag as an extra. Commands that pass unknown flags
// through (replay, validate, bench, profile to kerncap-replay) are left to
// kerncap-replay, which names them.
int CheckFlags(Cli& cli, int argc, char** argv, bool json) {
  std::vector<CLI::App*> chain = {&cli.app};
  std::vector<std::string> flags_seen;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") break;
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      flags_seen.push_back(a.substr(0, a.find('=')));
      continue;
    }
    if (!a.empty() && a[0] == '-') {
      if (TakesValue(a)) ++i;
      continue;
    }
    // A command word (or a nested one: config set-context) extends the chain.
    for (CLI::App* sub : chain.back()->get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->get_name() == a) {
        chain.push_back(sub);
        break;
      }
    }
  }
  if (chain.size() < 2) return -1;
  for (const char* passes : {"replay", "validate", "bench", "profile"}) {
    if (chain[1]->get_name() == passes) return -1;
  }
  std::vector<std::string> known;
  for (CLI::App* level : chain) {
    for (const CLI::Option* o : level->get_options()) {
      for (const std::string& l : o->get_lnames()) known.push_back("--" + l);
    }
  }
  for (const std::string& f : flags_seen) {
    if (std::find(known.begin(), known.end(), f) != known.end()) continue;
    std::string near = NearestCommand(f, known);
    std::string where = chain.size() > 1 ? chain.back()->get_name() : "kerncapctl";
    absl::Status s = absl::InvalidArgumentError(absl::StrCat(
        "unknown option ", f, " for ", where,
        near.empty() ? std::string() : absl::StrCat("; did you mean ", near, "?"),
        " (kerncapctl ", where, " --help lists its options)"));
    if (json) {
      json_policy::WriteError(std::cerr, s, exit_code::kUsage);
    } else {
      std::cerr << "kerncapctl: " << s.message() << std::endl;
    }
    return exit_code::kUsage;
  }
  return -1;
}

int Fail(const absl::Status& status, bool json) {
  int code = exit_code::ForStatus(status);
  if (json) {
    json_policy::WriteError(std::cerr, status, code);
  } else {
    std::cerr << "kerncapctl: " << status.message() << std::endl;
  }
  return code;
}

// gRPC's own log lines ("E1207 ... ssl_transport_security.cc:... Handshake
// failed ...") say, in gRPC's words and before it, what kerncapctl then says
// in its own; they are dropped unless the user asks gRPC to log
// (GRPC_VERBOSITY or GRPC_TRACE set).
void QuietGrpcLogs() {
  if (std::getenv("GRPC_VERBOSITY") != nullptr || std::getenv("GRPC_TRACE") != nullptr) return;
  gpr_set_log_function([](gpr_log_func_args*) {});
}

int Main(int argc, char** argv) {
  QuietGrpcLogs();
  Cli cli;
  CLI::App& app = cli.app;
  GlobalOptions& g = cli.g;
  app.footer(kFooter);
  app.require_subcommand(1);
  app.fallthrough();
  app.allow_extras();  // for replay/validate/bench only; checked after parsing
  app.set_version_flag("--version", std::string("kerncapctl ") + ::kerncap::kVersion);

  service::PathEnv env = service::PathEnv::FromProcess();
  g.conn.socket = service::DefaultClientSocketPath(env);
  g.config_path = service::DefaultClientConfigPath(env);
  g.endpoint_flags.push_back(
      app.add_option("--socket", g.conn.socket,
                     "kerncapd Unix socket; with --host or $KERNCAP_SOCKET it beats the current "
                     "context (default: your own kerncapd's, else the node's system daemon's)")
          ->capture_default_str());
  g.endpoint_flags.push_back(
      app.add_option("--host", g.conn.host, "kerncapd TCP endpoint HOST:PORT (TLS)"));
  g.tls_ca = app.add_option("--tls-ca", g.conn.tls_ca, "PEM CA bundle to verify the daemon (TCP)");
  g.tls_cert = app.add_option("--tls-cert", g.conn.tls_cert, "client certificate PEM (mutual TLS)");
  g.tls_key = app.add_option("--tls-key", g.conn.tls_key, "client key PEM (mutual TLS)");
  g.token_file =
      app.add_option("--token-file", g.conn.token_file, "file holding the bearer token (TCP)");
  g.insecure =
      app.add_flag("--insecure", g.conn.insecure, "plaintext TCP (daemon started with --insecure-tcp)");
  app.add_option("--context", g.context,
                 "use this context from the contexts file (kerncapctl help contexts)");
  app.add_option("-o,--output", g.output,
                 "table | wide | json | yaml | name | jsonpath=TEMPLATE | custom-columns=SPEC "
                 "(kerncapctl help output)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            absl::StatusOr<OutputSpec> spec = ParseOutputSpec(v);
            return spec.ok() ? "" : std::string(spec.status().message());
          },
          "FORMAT"));
  app.add_option("--sort-by", g.sort_by,
                 "order a list command's items by this JSON field (captures, agents, arms, "
                 "substitutions; kerncapctl help output)");
  app.add_flag("--json", g.json, "the same as -o json (docs/JSON.md)");
  app.add_flag("-q,--quiet", g.quiet, "ids only, one per line");
  app.add_flag("--no-headers", g.no_headers, "tables without their header row");
  app.add_option("--timeout", g.conn.timeout_s, "seconds to wait for unary calls (0: forever)")
      ->capture_default_str()
      ->check(Number(0));

  AddDaemonCommands(cli);
  AddArmCommands(cli);
  AddCaptureCommands(cli);
  AddTransferCommands(cli);
  AddReplayCommands(cli);
  AddSubstituteCommands(cli);
  AddConfigCommands(cli);
  AddHelpCommands(cli);
  AddClusterCommands(cli);  // after the commands it extends

  // --json anywhere means errors are JSON too, even for a bad command line.
  bool json_requested = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json" || a == "-ojson" || a == "--output=json" ||
        ((a == "-o" || a == "--output") && i + 1 < argc && std::string(argv[i + 1]) == "json")) {
      json_requested = true;
    }
  }
  if (int rc = CheckVerb(cli, argc, argv, json_requested); rc >= 0) return rc;
  if (int rc = CheckFlags(cli, argc, argv, json_requested); rc >= 0) return rc;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    if (json_requested) {
      json_policy::WriteError(std::cerr, absl::InvalidArgumentError(e.what()), exit_code::kUsage);
      return exit_code::kUsage;
    }
    app.exit(e);
    return exit_code::kUsage;
  }
  Output out{std::cout};
  const OutputSpec spec = *ParseOutputSpec(g.json ? "json" : g.output);  // checked by CLI11
  out.format = spec.format;
  out.spec = spec.spec;
  out.quiet = g.quiet;
  out.no_headers = g.no_headers;
  out.sort_by = g.sort_by;
  const bool json = out.json_errors() || json_requested;
  if (!g.sort_by.empty() && !cli.sortable) {
    return Fail(absl::InvalidArgumentError(
                    "--sort-by orders the items of a list command (captures, agents, arms, "
                    "substitutions); this command prints no list"),
                json);
  }

  // Unrecognised arguments are kept (app.allow_extras) only for the replay
  // commands, which pass them through; everywhere else they are an error.
  std::vector<std::string> extras = app.remaining();
  cli.extras = extras;
  if (!extras.empty() && !cli.accepts_extras) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
                    "unexpected argument", extras.size() > 1 ? "s " : " ",
                    absl::StrJoin(extras, " "), " (kerncapctl COMMAND --help lists its options)")),
                json);
  }
  ApplyClusterMode(cli, argc, argv);  // --slurm-job / --endpoints: the fleet
  if (!cli.remote && !cli.local) return exit_code::kUsage;
  if (cli.resolve_connection) {
    if (absl::Status s = ResolveConnection(g); !s.ok()) return Fail(s, json);
  }
  if (cli.local) {
    absl::StatusOr<int> rc = cli.local(out);
    std::cout.flush();
    if (!rc.ok()) return Fail(rc.status(), json);
    return *rc;
  }
  auto connection = Connection::Open(g.conn);
  if (!connection.ok()) return Fail(connection.status(), json);
  absl::Status status = cli.remote(**connection, out);
  std::cout.flush();
  if (!status.ok()) return Fail(status, json);
  return exit_code::kOk;
}

}  // namespace
}  // namespace kerncap::ctl

int main(int argc, char** argv) { return kerncap::ctl::Main(argc, argv); }
