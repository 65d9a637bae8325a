// Command group: arming captures (arm, disarm, arms).
#include <memory>
#include <string>

#include "client/kerncapctl/cli.h"
#include "client/kerncapctl/commands.h"
#include "common/control/limits.h"

namespace kerncap::ctl {

void AddArmCommands(Cli& cli) {
  auto opts = std::make_shared<ArmOptions>();
  CLI::App* arm = cli.app.add_subcommand("arm", "capture the next dispatch(es) of a kernel");
  arm->add_option("--kernel", opts->kernel, "kernel name, matched per --match")->required();
  arm->add_option("--match", opts->match,
                  "substring | glob (fnmatch) | regex (RE2-style, no backreferences) | mangled "
                  "(exact)")
      ->capture_default_str();
  arm->add_option("--pid", opts->pid, "only this process")
      ->check(WholeNumber(1, std::numeric_limits<uint32_t>::max()));
  arm->add_option("--process", opts->process, "only processes whose name contains this");
  arm->add_option("--device", opts->device, "only this device ordinal (default: any)")
      ->check(WholeNumber(0, std::numeric_limits<int32_t>::max()));
  arm->add_option("--rank", opts->rank,
                  "only the process of this rank in a parallel job (MPI, PMI, torchrun, Slurm)")
      ->check(WholeNumber(0, std::numeric_limits<int32_t>::max()));
  arm->add_option("--skip", opts->skip,
                  "let this many matching dispatches (per process) pass first, then take --count")
      ->check(WholeNumber(0, static_cast<long long>(service::kMaxArmCount)))
      ->capture_default_str();
  arm->add_option("--nth", opts->nth,
                  "capture only the nth matching dispatch (1-based) of each process; not with "
                  "--skip. Dispatches an older arm takes are not counted by younger ones")
      ->check(WholeNumber(1, static_cast<long long>(service::kMaxArmCount)));
  arm->add_option("--count", opts->count, "captures to take before the arm is done")
      ->check(WholeNumber(1, static_cast<long long>(service::kMaxArmCount)))
      ->capture_default_str();
  arm->add_option("--per-shape", opts->per_shape,
                  "one capture per distinct launch shape (per process; --count caps them, "
                  "default 16): scalars = launch configuration and the scalar (non-pointer) "
                  "arguments, launch = launch configuration only")
      ->expected(0, 1)
      ->default_str("scalars");
  arm->add_option("--ttl", opts->ttl, "expire after this long (30s, 5m, 2h, 1d; default: never)")
      ->check(DurationValue());
  arm->add_option("--tag", opts->tags, "k=v tag copied to every capture (repeatable)");
  SetCommandHelp(arm, Uses::kDaemon,
                 {"kerncapctl arm --kernel=matmul --count=1",
                  "kerncapctl arm --kernel='gemm_*' --match=glob --pid=4242 --ttl=10m --tag run=base",
                  "kerncapctl arm --kernel=softmax --nth=100 -q     # prints the arm id only",
                  "kerncapctl arm --kernel=gemm --per-shape --count=8   # one per shape, at most 8"},
                 "Selectors: kerncapctl help selectors.");
  CLI::Option* count_option = arm->get_option("--count");
  CLI::Option* per_shape_option = arm->get_option("--per-shape");
  arm->callback([&cli, opts, count_option, per_shape_option] {
    opts->count_given = count_option->count() > 0;
    // Given without a value: the default mode.
    if (per_shape_option->count() > 0 && opts->per_shape.empty()) opts->per_shape = "scalars";
    if (opts->nth != 0 && !opts->per_shape.empty()) {
      throw CLI::ValidationError("--per-shape",
                                 "takes the first dispatch of each shape; --nth names one "
                                 "dispatch (use --skip to let dispatches pass first)");
    }
    cli.remote = [opts](Connection& c, Output o) { return CmdArm(c, o, *opts); };
  });

  auto disarm_id = std::make_shared<std::string>();
  auto disarm_all = std::make_shared<bool>(false);
  CLI::App* disarm = cli.app.add_subcommand("disarm", "cancel an arm (or all of them)");
  disarm->add_option("ARM", *disarm_id, "arm id");
  disarm->add_flag("--all", *disarm_all, "disarm every active arm");
  SetCommandHelp(disarm, Uses::kDaemon, {"kerncapctl disarm arm-3f2a", "kerncapctl disarm --all"});
  disarm->callback([&cli, disarm_id, disarm_all] {
    if (disarm_id->empty() == !*disarm_all) {
      throw CLI::ValidationError("disarm", "give an ARM id or --all (not both)");
    }
    cli.remote = [disarm_id, disarm_all](Connection& c, Output o) {
      return CmdDisarm(c, o, *disarm_id, *disarm_all);
    };
  });

  auto arms_all = std::make_shared<bool>(false);
  CLI::App* arms = cli.app.add_subcommand("arms", "list arms, and why selected dispatches were not captured");
  arms->add_flag("--all", *arms_all, "include done, expired and disarmed arms");
  SetCommandHelp(arms, Uses::kDaemon,
                 {"kerncapctl arms", "kerncapctl arms --all -o json", "kerncapctl arms -q"});
  arms->callback([&cli, arms_all] {
    cli.sortable = true;
    cli.remote = [arms_all](Connection& c, Output o) { return CmdArms(c, o, *arms_all); };
  });
}

}  // namespace kerncap::ctl
