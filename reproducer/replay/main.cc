// kerncap-replay: replays one captured kernel dispatch on a GPU, with every
// captured buffer at its original virtual address (see replay_session.h).
//
//   kerncap-replay validate capture.kcap [--dtype=f32 --rtol=1e-5 ...]
//   kerncap-replay bench capture.kcap --iterations=200 --cold-l2 --json
//   kerncap-replay bench capture.kcap --code-object=new.cubin   (+ the captured
//                  binary, interleaved: speedup; --no-compare-original: alone)
//   kerncap-replay run --daemon=unix:/run/kerncap/kerncapd.sock cap-7f3a
//                  (reads kerncapd's store directly when it can: daemon_fetch.h)
//   kerncap-replay run --store=/var/lib/kerncap/store cap-7f3a   (read-only)
//   kerncap-replay serve capture.kcap --socket=/tmp/k.sock   (resident mode,
//   kerncap-replay submit --socket=/tmp/k.sock cand.cubin     serve/serve_cli.h)
//   kerncap-replay validate capture.kcap --grid=128 --block=128  (launch
//                  overrides: core/launch_override.h)
//   kerncap-replay profile capture.kcap [--code-object=V]    (Nsight Compute:
//                  profile.h)
//
// One engine per capture (engine_factory.h): HSA captures (PLATFORM_HSA, or
// --platform=hsa) replay through hsa/ with libhsa-runtime64 loaded at run
// time (--hsa-runtime=PATH or $KERNCAP_HSA_RUNTIME name another library,
// e.g. the tests' simulated runtime; ROCm >= 6 is required: vmem), the rest
// through cuda/.
//
// Exit codes (common/exit_codes.h, docs/EXIT_CODES.md): 0 ok / validation
// passed, 8 validation failed or incomplete (captured state left uncompared,
// named in the report; bench: a timed binary failed its validation before or
// after the timing), 1 replay error, 2 usage, 3 not found, 77 no CUDA driver
// or device, or no usable HSA runtime (the skip code of the tests).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "common/cli_values.h"
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "common/exit_codes.h"
#include "common/json_policy.h"
#include "reproducer/replay/core/capture_source.h"
#include "reproducer/replay/core/compare_options.h"
#include "reproducer/replay/core/daemon_fetch.h"
#include "reproducer/replay/core/engine.h"
#include "reproducer/replay/core/launch_override.h"
#include "reproducer/replay/cuda/cuda_driver.h"
#include "reproducer/replay/engine_factory.h"
#include "reproducer/replay/cuda/ncu_profile.h"
#include "reproducer/replay/serve/serve_cli.h"

namespace kerncap::replay {
namespace {

// The shared exit-code table (common/exit_codes.h, docs/EXIT_CODES.md).
constexpr int kExitPass = exit_code::kOk;
constexpr int kExitFail = exit_code::kMismatch;  // validation ran, outputs differ
constexpr int kExitUsage = exit_code::kUsage;
constexpr int kExitError = exit_code::kError;
constexpr int kExitNoDevice = exit_code::kNoDevice;

struct Common {
  std::string source;  // .kcap path, or capture id with --daemon / --store
  std::string daemon;
  std::string store;       // read the capture from this store directory (read-only)
  bool via_export = false;  // --daemon: always stream through ExportCapture
  int device = -1;
  bool json = false;
  bool no_relocate = false;
  bool force_relocate = false;
  std::string platform = "auto";  // auto (from the capture), cuda, hsa
  std::string hsa_runtime;        // HSA runtime library (default: $KERNCAP_HSA_RUNTIME, ROCm's)
  bool verify_digests = false;    // recompute every chunk's SHA-256 (capture_source.h)
  std::string code_object;        // replaces the captured code object (reproducer recompile)
  // Launch overrides, as given (parsed by ParseLaunchFlags).
  std::string grid, block, cluster, cache_preference;
  std::optional<uint32_t> shared_mem, max_dynamic_shared_mem;
};

absl::StatusOr<LaunchOverride> ParseLaunchFlags(const Common& c) {
  LaunchOverride o;
  if (!c.grid.empty()) {
    auto d = ParseDim3(c.grid);
    if (!d.ok()) return absl::InvalidArgumentError(absl::StrCat("--grid: ", d.status().message()));
    o.grid = *d;
  }
  if (!c.block.empty()) {
    auto d = ParseDim3(c.block);
    if (!d.ok()) return absl::InvalidArgumentError(absl::StrCat("--block: ", d.status().message()));
    o.block = *d;
  }
  if (!c.cluster.empty()) {
    auto d = ParseDim3(c.cluster);
    if (!d.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--cluster: ", d.status().message()));
    }
    o.cluster = *d;
  }
  if (!c.cache_preference.empty()) {
    auto p = ParseCachePreference(c.cache_preference);
    if (!p.ok()) return p.status();
    o.cache_preference = *p;
  }
  o.shared_mem_bytes = c.shared_mem;
  o.max_dynamic_shared_mem = c.max_dynamic_shared_mem;
  return o;
}

// How validate (and bench's validations) compare: --dtype, --region-dtype,
// --atol, --rtol, --ulp, --nan-unequal, --compare-on.
struct CompareFlags {
  std::string dtype;
  std::string compare_on = "auto";
  std::vector<std::string> region_dtypes;
  CompareOptions options;
  bool nan_unequal = false;
};

void AddCompareFlags(CLI::App* app, CompareFlags* f) {
  app->add_option("--dtype", f->dtype,
                  "element type of every region (f32, f16, bf16, f64, i32, ...)");
  app->add_option("--region-dtype", f->region_dtypes,
                  "SEL:DTYPE for one region; SEL = 0xVA, pre-image index or variable name "
                  "(repeatable)");
  app->add_option("--atol", f->options.tolerance.atol, "absolute tolerance")
      ->check(cli::Number(0));
  app->add_option("--rtol", f->options.tolerance.rtol, "relative tolerance")
      ->check(cli::Number(0));
  app->add_option("--ulp", f->options.tolerance.ulp,
                  "tolerance in units in the last place (floats)")
      ->check(cli::WholeNumber(0, std::numeric_limits<long long>::max()));
  app->add_flag("--nan-unequal", f->nan_unequal, "a NaN never matches (default: NaN matches NaN)");
  app->add_option("--compare-on", f->compare_on,
                  "where device regions are compared (CUDA): auto (the GPU from 64 MiB of "
                  "device regions), device (the GPU) or host; the verdict is the same")
      ->check(CLI::IsMember({"auto", "device", "host"}))
      ->capture_default_str();
}

// The options the flags say; a bad dtype is a usage error.
absl::StatusOr<CompareOptions> ParseCompareFlags(const CompareFlags& f) {
  CompareOptions cmp = f.options;
  if (!f.dtype.empty()) {
    auto t = ParseDType(f.dtype);
    if (!t.ok()) return t.status();
    cmp.dtype = *t;
  }
  for (const std::string& rd : f.region_dtypes) {
    auto r = ParseRegionDType(rd);
    if (!r.ok()) return r.status();
    cmp.rules.push_back(*r);
  }
  cmp.tolerance.nan_equal = !f.nan_unequal;
  auto place = ParseComparePlace(f.compare_on);
  if (!place.ok()) return place.status();
  cmp.place = *place;
  return cmp;
}

int Error(const absl::Status& s, bool json) {
  // No driver / no device is "skipped" for the GPU tests, not a failure.
  const bool no_device =
      IsNoCudaDeviceError(s) || absl::StrContains(s.message(), "no usable HSA runtime");
  const int code = no_device ? kExitNoDevice : exit_code::ForStatus(s);
  if (json) {
    json_policy::WriteError(std::cerr, s, code);  // docs/JSON.md: errors on stderr
  } else {
    std::cerr << "kerncap-replay: " << s.message() << std::endl;
  }
  return code;
}

// Where the chunks come from (said on stderr; --json reports origin()):
// --store: that store directory; --daemon: kerncapd's store directly when
// this process can read it, else its export stream (daemon_fetch.h); else
// SOURCE is a .kcap file.
absl::StatusOr<std::unique_ptr<CaptureSource>> OpenCaptureFile(const Common& c) {
  if (!c.store.empty()) {
    auto src = CaptureSource::OpenStore(c.store, c.source);
    if (src.ok()) {
      std::cerr << "kerncap-replay: reading " << (*src)->manifest().capture_id()
                << " from store " << (*src)->origin().substr(6) << " (read-only)" << std::endl;
    }
    return src;
  }
  if (c.daemon.empty()) return CaptureSource::OpenKcap(c.source);
  DaemonSourceOptions options;
  options.allow_store = !c.via_export;
  std::string note;
  auto src = OpenDaemonCapture(c.daemon, c.source, options, &note);
  if (src.ok() && !note.empty()) std::cerr << "kerncap-replay: " << note << std::endl;
  return src;
}

absl::StatusOr<std::unique_ptr<CaptureSource>> OpenSource(const Common& c) {
  auto src = OpenCaptureFile(c);
  if (src.ok()) (*src)->set_verify_content_digests(c.verify_digests);
  return src;
}

// The engine for the command (engine_factory.h); *src is the capture.
absl::StatusOr<std::unique_ptr<ReplayEngine>> OpenEngineFor(const Common& c,
                                                           std::unique_ptr<CaptureSource>* src) {
  auto s = OpenSource(c);
  if (!s.ok()) return s.status();
  *src = std::move(*s);
  EngineOptions eo;
  eo.device = c.device;
  eo.allow_relocation = !c.no_relocate;
  eo.force_relocation = c.force_relocate;
  eo.code_object_path = c.code_object;
  eo.hsa_runtime_path = c.hsa_runtime;
  auto launch = ParseLaunchFlags(c);
  if (!launch.ok()) return launch.status();
  eo.launch = *launch;
  return OpenEngine(src->get(), c.platform, eo);
}

// The keys every JSON document of an engine carries.
void AddEngineJson(const ReplayEngine& e, const CaptureSource& src, nlohmann::json* j) {
  (*j)["platform"] = e.platform();
  nlohmann::json extra = e.PlatformJson();
  if (!extra.is_null()) (*j)[e.platform()] = extra;
  (*j)["source"] = src.origin();  // kcap:<file> | store:<dir> | export
}

void AddCommon(CLI::App* app, Common* c) {
  app->add_option("SOURCE", c->source,
                  "capture file (.kcap), or a capture id with --daemon or --store")
      ->required();
  app->add_option("--daemon", c->daemon,
                  "read the capture from kerncapd at unix:PATH (its store directly when "
                  "readable here, else through its export stream)");
  app->add_option("--store", c->store,
                  "read the capture (SOURCE: id or unique prefix) from this kerncap store "
                  "directory, read-only (no lock; fine while kerncapd runs)");
  app->add_flag("--via-export", c->via_export,
                "with --daemon: always stream the capture through kerncapd's export, even when "
                "its store is readable here");
  app->add_option("--device", c->device, "GPU ordinal (default: the captured one)")
      ->check(cli::WholeNumber(0, std::numeric_limits<int>::max()));
  app->add_flag("--json", c->json, "print one JSON document on stdout");
  app->add_flag("--no-relocate", c->no_relocate,
                "fail instead of relocating when an original address cannot be had");
  app->add_flag("--force-relocate", c->force_relocate,
                "map everything at new addresses and patch pointers (tests the fallback)");
  app->add_option("--platform", c->platform, "auto (from the capture), cuda or hsa")
      ->check(CLI::IsMember({"auto", "cuda", "hsa"}))
      ->capture_default_str();
  app->add_option("--hsa-runtime", c->hsa_runtime,
                  "HSA runtime library to load (default: $KERNCAP_HSA_RUNTIME, else "
                  "libhsa-runtime64.so.1)");
  app->add_flag("--verify-digests", c->verify_digests,
                "recompute every chunk's SHA-256 and compare it with its address (slower; "
                "the per-record XXH3 is always checked)");
  app->add_option("--code-object", c->code_object,
                  "load the kernel from FILE (a rebuilt cubin/PTX or hsaco defining the "
                  "captured kernel name) instead of the captured code object");
  // Launch overrides (CUDA): validated; a failure the captured code object
  // shares at the new shape is reported as launch-shape dependent.
  app->add_option("--grid", c->grid, "launch override: blocks, X[,Y[,Z]] (CUDA)");
  app->add_option("--block", c->block, "launch override: threads per block, X[,Y[,Z]] (CUDA)");
  app->add_option("--shared-mem", c->shared_mem,
                  "launch override: dynamic shared memory bytes (CUDA)")
      ->check(cli::WholeNumber(0, std::numeric_limits<uint32_t>::max()));
  app->add_option("--max-dynamic-shared-mem", c->max_dynamic_shared_mem,
                  "launch override: the max dynamic shared memory attribute, bytes (CUDA)")
      ->check(cli::WholeNumber(0, std::numeric_limits<uint32_t>::max()));
  app->add_option("--cache-preference", c->cache_preference,
                  "launch override: none, shared, l1 or equal (cuFuncSetCacheConfig; CUDA)");
  app->add_option("--cluster", c->cluster, "launch override: cluster dims, X[,Y[,Z]] (CUDA)");
}

// Skipped, not failed (exit 77): what is missing, on stderr and in the JSON.
int Skip(const std::string& reason, bool json) {
  if (json) {
    std::cout << nlohmann::json({{"command", "profile"}, {"skipped", true}, {"reason", reason}})
                     .dump(2)
              << std::endl;
  }
  std::cerr << "kerncap-replay: profile skipped: " << reason << std::endl;
  return kExitNoDevice;
}

// `run` with the same capture, code object and launch as `c`.
std::vector<std::string> RunArgs(const Common& c) {
  std::vector<std::string> a = {"run", c.source, "--platform=" + c.platform};
  auto opt = [&](const char* flag, const std::string& v) {
    if (!v.empty()) a.push_back(absl::StrCat(flag, "=", v));
  };
  opt("--daemon", c.daemon);
  opt("--store", c.store);
  opt("--hsa-runtime", c.hsa_runtime);
  opt("--code-object", c.code_object);
  opt("--grid", c.grid);
  opt("--block", c.block);
  opt("--cluster", c.cluster);
  opt("--cache-preference", c.cache_preference);
  if (c.shared_mem) a.push_back(absl::StrCat("--shared-mem=", *c.shared_mem));
  if (c.max_dynamic_shared_mem) {
    a.push_back(absl::StrCat("--max-dynamic-shared-mem=", *c.max_dynamic_shared_mem));
  }
  if (c.device >= 0) a.push_back(absl::StrCat("--device=", c.device));
  if (c.via_export) a.push_back("--via-export");
  if (c.no_relocate) a.push_back("--no-relocate");
  if (c.force_relocate) a.push_back("--force-relocate");
  if (c.verify_digests) a.push_back("--verify-digests");
  return a;
}

int Profile(const Common& c, const std::string& ncu_flag, int timeout_s) {
  auto src = OpenSource(c);
  if (!src.ok()) return Error(src.status(), c.json);
  if (EnginePlatform(**src, c.platform) != "cuda") {
    return Error(absl::UnimplementedError("profile runs Nsight Compute, which profiles CUDA "
                                          "kernels only (profile HSA kernels with rocprof)"),
                 c.json);
  }
  if (auto launch = ParseLaunchFlags(c); !launch.ok()) {
    Error(launch.status(), c.json);
    return kExitUsage;
  }
  std::optional<std::string> ncu = FindNcu(ncu_flag);
  if (!ncu) {
    return Skip(ncu_flag.empty() ? "ncu (Nsight Compute) not found: install it, put it on PATH "
                                   "or name it with --ncu or $KERNCAP_NCU"
                                 : absl::StrCat("--ncu ", ncu_flag, " is not an executable"),
                c.json);
  }
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) return Error(absl::InternalError("cannot resolve /proc/self/exe"), c.json);
  std::vector<std::string> child = RunArgs(c);
  child.insert(child.begin(), self);
  const std::string kernel = (*src)->manifest().kernel().mangled_name();
  std::vector<std::string> argv = NcuArgs(kernel, child);
  argv.insert(argv.begin(), *ncu);
  auto r = RunProcess(argv, timeout_s);
  if (!r.ok()) return Error(r.status(), c.json);
  if (std::optional<std::string> why = NcuSkipReason(*r)) return Skip(*why, c.json);
  auto tail = [](const std::string& s) {
    return s.size() > 2000 ? s.substr(s.size() - 2000) : s;
  };
  if (r->exit_code != 0) {
    return Error(absl::InternalError(absl::StrCat("ncu exited with ", r->exit_code, ": ",
                                                  tail(r->err + r->out))),
                 c.json);
  }
  auto figures = ParseNcuCsv(r->out);
  if (!figures.ok()) {
    return Error(absl::Status(figures.status().code(),
                              absl::StrCat(figures.status().message(), "; ncu said: ",
                                           tail(r->err + r->out))),
                 c.json);
  }
  if (c.json) {
    nlohmann::json j = ProfileJson(*figures);
    j["command"] = "profile";
    j["capture_id"] = (*src)->manifest().capture_id();
    j["ncu"] = *ncu;
    j["code_object"] = c.code_object.empty() ? "captured" : c.code_object;
    j["source"] = (*src)->origin();
    std::cout << j.dump(2) << std::endl;
  } else {
    std::cout << "capture " << (*src)->manifest().capture_id() << " ("
              << (c.code_object.empty() ? "captured code object" : c.code_object)
              << "), profiled with " << *ncu << "\n"
              << FormatProfile(*figures);
  }
  return kExitPass;
}

int Main(int argc, char** argv) {
  CLI::App app{"kerncap-replay: restore a captured kernel dispatch at its original addresses, "
               "launch it, validate against the captured outputs, benchmark it."};
  app.require_subcommand(1);
  app.footer("Exit codes: " + exit_code::ExitCodesSummary() +
             ". validate and bench exit 8 (mismatch) when the outputs differ or state was left "
             "uncompared (bench: a timed binary did not validate before or after the timing), "
             "1 for a replay error, 77 without a CUDA driver or device (HSA: no usable runtime, "
             "ROCm < 6, or no GPU agent).");

  Common run_c, val_c, bench_c;
  CLI::App* run = app.add_subcommand("run", "restore, launch once, report");
  AddCommon(run, &run_c);

  CLI::App* val = app.add_subcommand("validate", "launch once and compare with the captured "
                                                 "post-dispatch memory");
  AddCommon(val, &val_c);
  CompareFlags val_cmp;
  AddCompareFlags(val, &val_cmp);

  CLI::App* bench = app.add_subcommand("bench", "time many launches (device events)");
  AddCommon(bench, &bench_c);
  BenchOptions bo;
  bool samples = false;
  bench->add_option("--warmup", bo.warmup, "untimed launches first")->capture_default_str()
      ->check(cli::WholeNumber(0, std::numeric_limits<int>::max()));
  bench->add_option("--iterations", bo.iterations, "timed launches")->capture_default_str()
      ->check(cli::WholeNumber(1, std::numeric_limits<int>::max()));
  bench->add_flag("--cold-l2", bo.cold_l2, "overwrite a buffer larger than L2 before each launch");
  bool restore_on = false, restore_off = false;
  bench->add_flag("--restore-each", restore_on,
                  "restore the regions the kernel writes before each launch (default: on when "
                  "the capture shows writes)");
  bench->add_flag("--no-restore-each", restore_off, "never restore between launches")
      ->excludes("--restore-each");
  bench->add_flag("--samples", samples, "include every sample in the JSON");
  bool compare_on = false, compare_off = false;
  bench->add_flag("--compare-original", compare_on,
                  "also time the captured code object in the same run, interleaved (ABBA) "
                  "with the --code-object variant, and report the speedup (default: on "
                  "whenever --code-object is given; CUDA only)");
  bench->add_flag("--no-compare-original", compare_off, "time only the loaded code object")
      ->excludes("--compare-original");
  // Every timed binary is validated before and after the timing loop.
  CompareFlags bench_cmp;
  AddCompareFlags(bench, &bench_cmp);

  serve::ServeCommands serve_commands(&app);  // serve, submit
  // profile: Nsight Compute on `run` of the same capture (cuda/ncu_profile.h).
  Common prof_c;
  std::string ncu_flag;
  int ncu_timeout = 600;
  CLI::App* prof = app.add_subcommand(
      "profile", "run Nsight Compute (ncu) on one replayed launch and show duration, occupancy, "
                 "DRAM/L2 throughput, speed-of-light and roofline position (CUDA)");
  AddCommon(prof, &prof_c);
  prof->add_option("--ncu", ncu_flag,
                   "the ncu binary (default: $KERNCAP_NCU, PATH, /usr/local/cuda/bin, "
                   "/opt/nvidia/nsight-compute)");
  prof->add_option("--ncu-timeout", ncu_timeout, "seconds before ncu is killed")
      ->capture_default_str()->check(cli::WholeNumber(1, std::numeric_limits<int>::max()));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }

  if (std::optional<int> rc = serve_commands.Run()) return *rc;
  if (prof->parsed()) return Profile(prof_c, ncu_flag, ncu_timeout);
  std::unique_ptr<CaptureSource> src;
  if (run->parsed()) {
    auto e = OpenEngineFor(run_c, &src);
    if (!e.ok()) return Error(e.status(), run_c.json);
    auto info = (*e)->Run();
    if (!info.ok()) return Error(info.status(), run_c.json);
    if (run_c.json) {
      nlohmann::json j = ReplayInfoJson(*info);
      j["command"] = "run";
      AddEngineJson(**e, *src, &j);
      std::cout << j.dump(2) << std::endl;
    } else {
      std::cout << FormatReplayInfo(*info) << "launch: " << info->launch_ms << " ms\n";
    }
    return kExitPass;
  }
  if (val->parsed()) {
    absl::StatusOr<CompareOptions> parsed = ParseCompareFlags(val_cmp);
    if (!parsed.ok()) {
      Error(parsed.status(), val_c.json);
      return kExitUsage;
    }
    auto e = OpenEngineFor(val_c, &src);
    if (!e.ok()) return Error(e.status(), val_c.json);
    auto report = (*e)->Validate(*parsed);
    if (!report.ok()) return Error(report.status(), val_c.json);
    if (val_c.json) {
      nlohmann::json j = ValidationJson(*report);
      AddEngineJson(**e, *src, &j);
      std::cout << j.dump(2) << std::endl;
    } else {
      std::cout << FormatValidation(*report);
    }
    return report->passed() ? kExitPass : kExitFail;
  }
  if (bench->parsed()) {
    absl::StatusOr<CompareOptions> parsed = ParseCompareFlags(bench_cmp);
    if (!parsed.ok()) {
      Error(parsed.status(), bench_c.json);
      return kExitUsage;
    }
    bo.compare = *parsed;
    if (restore_on) bo.restore_each = 1;
    if (restore_off) bo.restore_each = 0;
    auto e = OpenEngineFor(bench_c, &src);
    if (!e.ok()) return Error(e.status(), bench_c.json);
    // CUDA: a variant is benched against the captured binary unless told
    // not to; HSA cannot compare yet (an explicit --compare-original is
    // refused by its engine).
    const bool cuda = std::string((*e)->platform()) == "cuda";
    bo.compare_original = compare_on || (cuda && !compare_off && !bench_c.code_object.empty());
    auto report = (*e)->Bench(bo);
    if (!report.ok()) return Error(report.status(), bench_c.json);
    if (bench_c.json) {
      nlohmann::json j = BenchJson(*report, samples);
      AddEngineJson(**e, *src, &j);
      std::cout << j.dump(2) << std::endl;
    } else {
      std::cout << FormatBench(*report);
    }
    // Times of a binary that does not validate are times of a wrong result.
    return report->verdicts_pass() ? kExitPass : kExitFail;
  }
  return kExitUsage;
}

}  // namespace
}  // namespace kerncap::replay

int main(int argc, char** argv) { return kerncap::replay::Main(argc, argv); }
