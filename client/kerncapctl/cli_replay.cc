// Command group: replay, validate, bench. kerncap-replay does the work
// (replay_commands.h); its flags are declared here too (for --help, and so a
// bad value is refused here with what was expected) and passed through
// verbatim. Anything else unrecognised is passed through as well.
#include <fcntl.h>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "client/kerncapctl/cli.h"
#include "client/kerncapctl/replay_commands.h"

namespace kerncap::ctl {
namespace {

enum class Pass { kFlag, kValue, kRepeated };

struct PassThrough {
  std::string name;
  Pass kind = Pass::kFlag;
  bool set = false;                 // kFlag
  std::string value;                // kValue
  std::vector<std::string> values;  // kRepeated
  CLI::Option* option = nullptr;
};

void AddReplay(Cli& cli, const std::string& name, const std::string& mode, const std::string& help,
               const std::vector<std::string>& examples) {
  CLI::App* sub = cli.app.add_subcommand(name, help);
  auto req = std::make_shared<ReplayRequest>();
  auto pass = std::make_shared<std::vector<std::unique_ptr<PassThrough>>>();
  sub->add_option("CAPTURE", req->capture, "capture id or unique prefix, or a .kcap file")
      ->required();
  sub->allow_extras();
  // `type`: the value's name in --help ("N", "FILE"); kerncap-replay's
  // defaults are in `desc`, since these options hold no value of their own.
  auto add = [&](const std::string& opt, Pass kind, const std::string& desc,
                 const CLI::Validator* check = nullptr, const std::string& type = "VALUE") {
    pass->push_back(std::make_unique<PassThrough>());
    PassThrough* p = pass->back().get();
    p->name = opt;
    p->kind = kind;
    if (kind == Pass::kFlag) {
      p->option = sub->add_flag(opt, p->set, desc);
    } else if (kind == Pass::kValue) {
      p->option = sub->add_option(opt, p->value, desc);
    } else {
      // One value per occurrence, so a value can never swallow CAPTURE.
      p->option = sub->add_option(opt, p->values, desc)
                      ->allow_extra_args(false)
                      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    }
    if (kind != Pass::kFlag) p->option->type_name(type);
    if (check != nullptr) p->option->check(*check);
  };
  const CLI::Validator ordinal = WholeNumber(0, 1 << 20);
  const CLI::Validator count = WholeNumber(0, 1'000'000'000);
  const CLI::Validator positive = WholeNumber(1, 1'000'000'000);
  const CLI::Validator tolerance = Number(0);
  const CLI::Validator compare_where = CLI::IsMember({"auto", "device", "host"});
  add("--device", Pass::kValue, "GPU ordinal (default: the captured one)", &ordinal, "N");
  add("--no-relocate", Pass::kFlag, "fail instead of relocating when an address cannot be had");
  add("--force-relocate", Pass::kFlag, "map everything at new addresses and patch pointers");
  add("--verify-digests", Pass::kFlag,
      "recompute every chunk's SHA-256 and compare it with its address (slower)");
  if (mode != "profile") {
    add("--code-object", Pass::kValue,
        "load the kernel from FILE (a rebuilt cubin/PTX or hsaco defining the captured kernel) "
        "instead of the captured code object",
        nullptr, "FILE");
  }
  if (mode == "validate" || mode == "bench") {
    // bench validates every timed binary before and after the timing loop.
    add("--dtype", Pass::kValue, "element type of every region (f32, f16, bf16, f64, i32, ...)",
        nullptr, "DTYPE");
    add("--region-dtype", Pass::kRepeated, "SEL:DTYPE for one region (repeatable)", nullptr,
        "SEL:DTYPE");
    add("--atol", Pass::kValue, "absolute tolerance (default: exact)", &tolerance, "X");
    add("--rtol", Pass::kValue, "relative tolerance (default: exact)", &tolerance, "X");
    add("--ulp", Pass::kValue, "tolerance in units in the last place (floats; default: exact)",
        &count, "N");
    add("--nan-unequal", Pass::kFlag, "a NaN never matches (default: NaN matches NaN)");
    add("--compare-on", Pass::kValue,
        "where device regions are compared (CUDA): auto (default: the GPU from 64 MiB of device "
        "regions), device or host; the verdict is the same",
        &compare_where, "WHERE");
  }
  if (mode == "bench") {
    add("--warmup", Pass::kValue, "untimed launches first (default: 5)", &count, "N");
    add("--iterations", Pass::kValue, "timed launches (default: 50)", &positive, "N");
    add("--cold-l2", Pass::kFlag, "flush L2 before each launch");
    add("--restore-each", Pass::kFlag,
        "restore written regions before each launch (default: on when the capture shows writes)");
    add("--no-restore-each", Pass::kFlag, "never restore between launches");
    add("--compare-original", Pass::kFlag,
        "also time the captured code object, interleaved (ABBA) with --code-object, and report "
        "the speedup (default: on whenever --code-object is given; CUDA only)");
    add("--no-compare-original", Pass::kFlag, "time only the loaded code object");
    add("--samples", Pass::kFlag, "include every sample in the JSON");
  }
  if (mode == "profile") {
    add("--code-object", Pass::kValue, "profile this rebuilt code object instead of the captured one",
        nullptr, "FILE");
    add("--ncu", Pass::kValue, "the ncu binary (default: $KERNCAP_NCU, PATH, the toolkit's places)",
        nullptr, "PATH");
    add("--ncu-timeout", Pass::kValue, "seconds before ncu is killed (default: 600)", &positive,
        "SECONDS");
  }
  // Launch overrides (kerncap-replay's launch_override.h), for every mode.
  add("--grid", Pass::kValue, "launch override: blocks X[,Y[,Z]]", nullptr, "X[,Y[,Z]]");
  add("--block", Pass::kValue, "launch override: threads per block X[,Y[,Z]]", nullptr,
      "X[,Y[,Z]]");
  add("--shared-mem", Pass::kValue, "launch override: dynamic shared memory bytes", &count, "BYTES");
  add("--max-dynamic-shared-mem", Pass::kValue,
      "launch override: the max dynamic shared memory attribute", &count, "BYTES");
  add("--cache-preference", Pass::kValue, "launch override: none, shared, l1 or equal", nullptr,
      "PREF");
  add("--cluster", Pass::kValue, "launch override: cluster dims X[,Y[,Z]]", nullptr, "X[,Y[,Z]]");
  SetCommandHelp(
      sub, Uses::kDaemon, examples,
      "kerncap-replay (found via $KERNCAP_REPLAY, next to kerncapctl, or on PATH) does the work "
      "on this machine's GPU; with --host the capture is first exported to a temporary .kcap; a "
      "CAPTURE that is an existing file is replayed as is. Other flags are passed through "
      "(kerncap-replay " +
          mode +
          " --help lists them). -o json gives kerncap-replay's JSON report. The exit code is "
          "kerncap-replay's: 0 ok, 8 outputs differ, 77 no GPU (kerncapctl help exit-codes).");
  sub->callback([&cli, sub, mode, pass, req] {
    req->mode = mode;
    req->flags.clear();
    for (const std::unique_ptr<PassThrough>& pt : *pass) {
      const PassThrough& p = *pt;
      if (p.option->count() == 0) continue;
      if (p.kind == Pass::kFlag) {
        req->flags.push_back(p.name);
      } else if (p.kind == Pass::kValue) {
        req->flags.push_back(p.name + "=" + p.value);
      } else {
        for (const std::string& v : p.values) req->flags.push_back(p.name + "=" + v);
      }
    }
    for (const std::string& extra : sub->remaining()) req->flags.push_back(extra);
    cli.accepts_extras = true;
    cli.local = [&cli, req](Output o) -> absl::StatusOr<int> {
      if (o.format == Format::kYaml || o.format == Format::kJsonPath ||
          o.format == Format::kCustomColumns) {
        return absl::InvalidArgumentError(
            "replay, validate, bench and profile print kerncap-replay's report: -o table, wide, "
            "json, or -q / -o name for none (the exit code says how it went)");
      }
      if (o.ids_only()) {
        // Nothing to name: the report is dropped, errors still go to stderr
        // and the exit code is kerncap-replay's (validate -q && echo same).
        std::cout.flush();
        int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (devnull >= 0) {
          ::dup2(devnull, STDOUT_FILENO);
          ::close(devnull);
        }
      }
      ReplayRequest r = *req;
      r.flags.insert(r.flags.end(), cli.extras.begin(), cli.extras.end());
      if (o.structured()) r.flags.push_back("--json");
      return RunReplayCommand(r, cli.g.conn);
    };
  });
}

}  // namespace

void AddReplayCommands(Cli& cli) {
  AddReplay(cli, "replay", "run", "restore a capture on this machine's GPU and launch it once",
            {"kerncapctl replay cap-7f3a", "kerncapctl replay matmul.kcap --device=1"});
  AddReplay(cli, "validate", "validate",
            "replay and compare with the captured outputs (tolerances: --dtype --atol --rtol --ulp)",
            {"kerncapctl validate cap-7f3a",
             "kerncapctl validate cap-7f3a --dtype=f32 --rtol=1e-5 --atol=1e-6 -o json",
             "kerncapctl validate matmul.kcap --region-dtype=0x7f2a00000000:bf16 --ulp=2"});
  AddReplay(cli, "bench", "bench", "time the captured kernel (--warmup --iterations --cold-l2)",
            {"kerncapctl bench cap-7f3a", "kerncapctl bench cap-7f3a --warmup=10 --iterations=200 --cold-l2 -o json"});
  AddReplay(cli, "profile", "profile",
            "run Nsight Compute (ncu) on the replayed kernel: duration, occupancy, DRAM/L2 "
            "throughput, speed-of-light, roofline (CUDA; exit 77 with the reason without ncu or "
            "counter access)",
            {"kerncapctl profile cap-7f3a", "kerncapctl profile cap-7f3a --code-object=build/kernel.cubin -o json",
             "kerncapctl profile cap-7f3a --block=256 --grid=4096"});
}

}  // namespace kerncap::ctl
