// Command group: the daemon and its agents (status, agents, kernels, version,
// watch).
#include <limits>
#include <memory>

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
  agents->callback([&cli] {
    cli.sortable = true;
    cli.remote = [](Connection& c, Output o) { return CmdAgents(c, o); };
  });

  auto kopts = std::make_shared<KernelsOptions>();
  CLI::App* kernels = cli.app.add_subcommand(
      "kernels", "the kernels live agents have loaded (the kernel census), to pick what to arm");
  kernels->add_option("--pid", kopts->pid, "only this process")
      ->check(WholeNumber(1, std::numeric_limits<uint32_t>::max()));
  kernels->add_option("--process", kopts->process, "only processes whose name contains this");
  kernels->add_option("--agent", kopts->agent, "only this agent id");
  kernels->add_option("--kernel", kopts->kernel,
                      "only kernels this pattern selects, exactly as `arm --kernel` would");
  kernels->add_option("--match", kopts->match, "how --kernel matches (as for arm)")
      ->capture_default_str();
  kernels->add_option("--sample", kopts->sample,
                      "first count each kernel's launches for this long (e.g. 5s, at most 60s): "
                      "how often it ran, with how many launch configurations and argument shapes")
      ->check(DurationValue());
  SetCommandHelp(kernels, Uses::kDaemon,
                 {"kerncapctl kernels", "kerncapctl kernels --process=python --kernel=gemm",
                  "kerncapctl kernels --sample=5s -o wide   # the hottest kernels and their shapes",
                  "kerncapctl kernels --pid=4242 -q     # mangled names, for --match=mangled"},
                 "CUDA lists the kernels of every module the driver has loaded; with lazy "
                 "loading (the default since CUDA 12.2) a module is loaded when one of its "
                 "kernels first runs. HSA lists the kernel symbols of loaded executables. "
                 "--sample turns the agents' launch callbacks on for the sample only; launches "
                 "are counted per kernel name, kernel nodes of CUDA graphs included.");
  kernels->callback([&cli, kopts] {
    cli.remote = [kopts](Connection& c, Output o) { return CmdKernels(c, o, *kopts); };
  });

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
