// Command group: live substitution (substitute, unsubstitute, substitutions;
// substitute_command.h says what each does).
#include <limits>
#include <memory>
#include <string>

#include "client/kerncapctl/cli.h"
#include "client/kerncapctl/substitute_command.h"

namespace kerncap::ctl {

void AddSubstituteCommands(Cli& cli) {
  auto opts = std::make_shared<SubstituteOptions>();
  CLI::App* sub = cli.app.add_subcommand(
      "substitute", "launch a variant's kernel instead of the original in the live application");
  sub->add_option("--kernel", opts->kernel, "kernel name (matched per --match)")->required();
  sub->add_option("--match", opts->match, "substring | glob | regex | mangled")
      ->capture_default_str();
  sub->add_option("--pid", opts->pid, "only this process")
      ->check(WholeNumber(1, std::numeric_limits<uint32_t>::max()));
  sub->add_option("--process", opts->process, "only processes whose name contains this");
  sub->add_option("--device", opts->device, "only this device ordinal (default: any)")
      ->check(WholeNumber(0, std::numeric_limits<int32_t>::max()));
  sub->add_option("--code-object", opts->code_object,
                  "the variant: cubin, fatbin or PTX with a kernel of the same mangled name")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--format", opts->format, "cubin | fatbin | ptx (default: from the file)")
      ->check(CLI::IsMember({"cubin", "fatbin", "ptx"}));
  sub->add_option("--count", opts->count,
                  "end after this many substituted dispatches per agent (0: no limit)")
      ->check(WholeNumber(0, std::numeric_limits<int64_t>::max()));
  sub->add_option("--ttl", opts->ttl, "end after this long (30s, 5m)")->check(DurationValue());
  sub->add_flag("--ab", opts->ab,
                "alternate original and variant per dispatch and time both on the device");
  sub->add_flag("--wait", opts->wait, "wait until it ends and print the final figures");
  auto* pre = sub->add_option("--preflight", opts->preflight,
                              "validate the variant against this capture of the same kernel "
                              "(or a .kcap file, imported first) before going live: kerncapd "
                              "runs kerncap-replay validate on its node, with your rights");
  auto* nopre = sub->add_flag("--no-preflight", opts->no_preflight,
                              "go live without validating the variant (a faulting variant "
                              "breaks the application's CUDA context)");
  pre->excludes(nopre);
  sub->add_flag("--all-processes", opts->all_processes,
                "substitute into every process of yours the selector's kernel runs in "
                "(needed when neither --pid nor --process names one)");
  SetCommandHelp(sub, Uses::kDaemon,
                 {"kerncapctl substitute --kernel=rms_norm --code-object=v.cubin "
                  "--preflight=4be1c0 --ab --count=200 --wait",
                  "kerncapctl substitute --kernel=gemm --code-object=v.ptx --no-preflight --ttl=30s"},
                 "A variant that faults inside the application cannot be undone (CUDA errors are "
                 "sticky): --preflight validates it against a capture first, on kerncapd's node "
                 "(where the GPU is). Exit 8, 9 or 77 when the preflight fails (nothing is "
                 "substituted). Only your own processes are reached (root's reach all).");
  sub->callback([&cli, opts] {
    if (opts->preflight.empty() && !opts->no_preflight) {
      throw CLI::ValidationError(
          "substitute", "give --preflight=CAPTURE (validates the variant first) or --no-preflight");
    }
    cli.remote = [opts](Connection& c, Output o) { return CmdSubstitute(c, o, *opts); };
  });

  auto unsub_id = std::make_shared<std::string>();
  CLI::App* unsub = cli.app.add_subcommand("unsubstitute", "end a live substitution");
  unsub->add_option("SUBSTITUTION", *unsub_id, "substitution id")->required();
  SetCommandHelp(unsub, Uses::kDaemon, {"kerncapctl unsubstitute sub-1"});
  unsub->callback([&cli, unsub_id] {
    cli.remote = [unsub_id](Connection& c, Output o) { return CmdUnsubstitute(c, o, *unsub_id); };
  });

  auto list_id = std::make_shared<std::string>();
  auto list_all = std::make_shared<bool>(false);
  CLI::App* list = cli.app.add_subcommand("substitutions", "live substitutions and their results");
  list->add_option("SUBSTITUTION", *list_id, "only this one");
  list->add_flag("--all", *list_all, "include ended substitutions");
  SetCommandHelp(list, Uses::kDaemon,
                 {"kerncapctl substitutions", "kerncapctl substitutions sub-1 -o json"});
  list->callback([&cli, list_id, list_all] {
    cli.sortable = true;
    cli.remote = [list_id, list_all](Connection& c, Output o) {
      return CmdSubstitutions(c, o, *list_id, *list_all);
    };
  });
}

}  // namespace kerncap::ctl
