// Command group: the daemon and its agents (status, agents, version, watch).
#include "client/kerncapctl/cli.h"
#include "client/kerncapctl/commands.h"
#include "common/exit_codes.h"

namespace kerncap::ctl {

void AddDaemonCommands(Cli& cli) {
  CLI::App* status = cli.app.add_subcommand("status", "daemon version, sockets, store size, agents, arms");
  SetCommandHelp(status, Uses::kDaemon,
                 {"kerncapctl status", "kerncapctl status -o json | jq .store",
                  "kerncapctl --context=node17 status"});
  status->callback([&cli] { cli.remote = [](Connection& c, Output o) { return CmdStatus(c, o); }; });

  CLI::App* agents =
      cli.app.add_subcommand("agents", "list connected agents (applications with the agent loaded)");
  SetCommandHelp(agents, Uses::kDaemon,
                 {"kerncapctl agents", "kerncapctl agents -o wide", "kerncapctl agents -q"});
  agents->callback([&cli] { cli.remote = [](Connection& c, Output o) { return CmdAgents(c, o); }; });

  CLI::App* version = cli.app.add_subcommand(
      "version", "client and daemon versions, API version, store format");
  SetCommandHelp(version, Uses::kDaemonOptional,
                 {"kerncapctl version", "kerncapctl version --json"},
                 "The daemon's part is left out, with the reason, when no daemon answers (the "
                 "command still succeeds).");
  version->callback([&cli] {
    cli.local = [&cli](Output o) -> absl::StatusOr<int> {
      absl::Status s = CmdVersion(cli.g.conn, o);
      if (!s.ok()) return s;
      return exit_code::kOk;
    };
  });

  CLI::App* watch = cli.app.add_subcommand("watch", "stream daemon events until interrupted");
  SetCommandHelp(watch, Uses::kDaemon,
                 {"kerncapctl watch", "kerncapctl watch --json | jq 'select(.capture_committed)'"},
                 "With --json each event is one JSON line, written as it happens.");
  watch->callback([&cli] { cli.remote = [](Connection& c, Output o) { return CmdWatch(c, o); }; });
}

}  // namespace kerncap::ctl
