// Command group: the store's captures (captures, show, rm, gc, verify).
#include <memory>
#include <string>
#include <vector>

#include "client/kerncapctl/cli.h"
#include "client/kerncapctl/commands.h"
#include "client/kerncapctl/diff_command.h"
#include "common/control/limits.h"

namespace kerncap::ctl {

void AddCaptureCommands(Cli& cli) {
  auto opts = std::make_shared<CapturesOptions>();
  CLI::App* caps = cli.app.add_subcommand("captures", "list captures in the store (newest first)");
  caps->add_option("--kernel", opts->kernel, "kernel name contains");
  caps->add_option("--pid", opts->pid, "captured from this process id")
      ->check(WholeNumber(1, std::numeric_limits<uint32_t>::max()));
  caps->add_option("--tag", opts->tag, "has tag k=v (or just k)");
  caps->add_option("--since", opts->since,
                   "created at or after: 2h (ago), 2026-11-29, '2026-11-29 18:00', RFC 3339")
      ->check(TimePointValue());
  caps->add_option("--until", opts->until, "created before (same forms as --since)")
      ->check(TimePointValue());
  caps->add_option("--limit", opts->limit, "at most this many (0: all)")
      ->check(WholeNumber(0, service::kMaxListLimit))
      ->capture_default_str();
  SetCommandHelp(caps, Uses::kDaemon,
                 {"kerncapctl captures --kernel=matmul --limit=20",
                  "kerncapctl captures --since=2h -o wide",
                  "kerncapctl captures --tag run=base -q | xargs kerncapctl rm"});
  caps->callback([&cli, opts] {
    cli.sortable = true;
    cli.remote = [opts](Connection& c, Output o) { return CmdCaptures(c, o, *opts); };
  });

  auto show_id = std::make_shared<std::string>();
  CLI::App* show = cli.app.add_subcommand(
      "show", "one capture: kernel, launch, arguments, memory map, sizes, dedup, footprint");
  show->add_option("CAPTURE", *show_id, "capture id or unique prefix")->required();
  SetCommandHelp(show, Uses::kDaemon,
                 {"kerncapctl show cap-7f3a", "kerncapctl show cap-7f3a -o json | jq .manifest.launch",
                  "kerncapctl show cap-7f3a -o yaml"});
  show->callback([&cli, show_id] {
    cli.remote = [show_id](Connection& c, Output o) { return CmdShow(c, o, *show_id); };
  });

  auto diff_ids = std::make_shared<std::vector<std::string>>();
  CLI::App* diff = cli.app.add_subcommand(
      "diff", "how two captures differ: kernel, launch, arguments, which regions and by how much");
  diff->add_option("CAPTURES", *diff_ids, "two capture ids or unique prefixes: A B")
      ->required()
      ->expected(2);
  SetCommandHelp(diff, Uses::kDaemon,
                 {"kerncapctl diff cap-7f3a cap-91bc", "kerncapctl diff cap-7f3a cap-91bc -o json"},
                 "Regions are matched by address; their input (the pre-dispatch image) and output "
                 "(the state after the dispatch) are compared chunk by chunk by content address, so "
                 "a differing chunk counts all its bytes. -q prints the two ids when they differ "
                 "and nothing when they are identical; the exit code is 0 either way.");
  diff->callback([&cli, diff_ids] {
    cli.remote = [diff_ids](Connection& c, Output o) {
      return CmdDiff(c, o, (*diff_ids)[0], (*diff_ids)[1]);
    };
  });

  auto rm_ids = std::make_shared<std::vector<std::string>>();
  CLI::App* rm = cli.app.add_subcommand("rm", "delete captures (space is reclaimed by gc)");
  rm->add_option("CAPTURE", *rm_ids, "capture ids or unique prefixes")->required();
  SetCommandHelp(rm, Uses::kDaemon,
                 {"kerncapctl rm cap-7f3a", "kerncapctl rm cap-7f3a cap-91bc",
                  "kerncapctl captures --kernel=old -q | xargs kerncapctl rm"},
                 "Every id is tried; the exit code is the first failure's.");
  rm->callback([&cli, rm_ids] {
    cli.remote = [rm_ids](Connection& c, Output o) { return CmdRm(c, o, *rm_ids); };
  });

  auto gc_dry = std::make_shared<bool>(false);
  CLI::App* gc = cli.app.add_subcommand("gc", "garbage-collect chunks no capture references");
  gc->add_flag("--dry-run", *gc_dry, "report only");
  SetCommandHelp(gc, Uses::kDaemon, {"kerncapctl gc --dry-run", "kerncapctl gc -o json"});
  gc->callback([&cli, gc_dry] {
    cli.remote = [gc_dry](Connection& c, Output o) { return CmdGc(c, o, *gc_dry); };
  });

  auto verify_id = std::make_shared<std::string>();
  auto rehash = std::make_shared<bool>(false);
  CLI::App* verify = cli.app.add_subcommand(
      "verify", "check stored chunks (one capture or the whole store); exit 5 on problems");
  verify->add_option("CAPTURE", *verify_id, "capture id (default: the whole store)");
  verify->add_flag("--rehash", *rehash, "recompute SHA-256 of every chunk (slow, thorough)");
  SetCommandHelp(verify, Uses::kDaemon,
                 {"kerncapctl verify", "kerncapctl verify cap-7f3a --rehash -o json"});
  verify->callback([&cli, verify_id, rehash] {
    cli.remote = [verify_id, rehash](Connection& c, Output o) {
      return CmdVerify(c, o, *verify_id, *rehash);
    };
  });
}

}  // namespace kerncap::ctl
