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
//
// HSA captures (PLATFORM_HSA, or --platform=hsa) replay through
// reproducer/hsa with libhsa-runtime64 loaded at run time (--hsa-runtime=PATH
// or $KERNCAP_HSA_RUNTIME name another library, e.g. the tests' simulated
// runtime); ROCm >= 6 is required (vmem).
//
// Exit codes: 0 ok / validation passed, 1 validation failed or incomplete
// (captured state left uncompared, named in the report; bench: a timed
// binary failed its validation before or after the timing), 2 usage, 3
// replay error, 77 no CUDA driver or device, or no usable HSA runtime (the
// skip code of the tests).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "common/exit_codes.h"
#include "common/json_policy.h"
#include "reproducer/replay/capture_source.h"
#include "reproducer/replay/compare_options.h"
#include "reproducer/replay/cuda_driver.h"
#include "reproducer/replay/daemon_fetch.h"
#include "reproducer/replay/replay_session.h"
#include "reproducer/replay/serve/serve_cli.h"
#ifdef KERNCAP_REPLAY_HAVE_HSA
#include "reproducer/hsa/hsa_cli.h"
#endif

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
};

// How validate (and bench's validations) compare: --dtype, --region-dtype,
// --atol, --rtol, --ulp, --nan-unequal.
struct CompareFlags {
  std::string dtype;
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
      ->check(CLI::NonNegativeNumber);
  app->add_option("--rtol", f->options.tolerance.rtol, "relative tolerance")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--ulp", f->options.tolerance.ulp,
                  "tolerance in units in the last place (floats)");
  app->add_flag("--nan-unequal", f->nan_unequal, "a NaN never matches (default: NaN matches NaN)");
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

absl::StatusOr<std::unique_ptr<ReplaySession>> OpenSession(const Common& c,
                                                          std::unique_ptr<CaptureSource>* src) {
  if (*src == nullptr) {  // the platform check may have opened it already
    auto s = OpenSource(c);
    if (!s.ok()) return s.status();
    *src = std::move(*s);
  }
  SessionOptions so;
  so.device = c.device;
  so.allow_relocation = !c.no_relocate;
  so.force_relocation = c.force_relocate;
  so.code_object_path = c.code_object;
  return ReplaySession::Create(src->get(), so);
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
  app->add_option("--device", c->device, "GPU ordinal (default: the captured one)");
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
}

// The HSA path of one command. nullopt: not an HSA capture (the CUDA path
// runs, with *src already open). Otherwise the exit code.
std::optional<int> MaybeHsa(const char* command, const Common& c,
                            std::unique_ptr<CaptureSource>* src, const CompareOptions* cmp,
                            const BenchOptions* bo, bool samples) {
  if (c.platform == "cuda") return std::nullopt;
  auto s = OpenSource(c);
  if (!s.ok()) return Error(s.status(), c.json);
  *src = std::move(*s);
  if (c.platform != "hsa" && (*src)->manifest().kernel().platform() != v1::PLATFORM_HSA) {
    return std::nullopt;
  }
#ifndef KERNCAP_REPLAY_HAVE_HSA
  (void)command, (void)cmp, (void)bo, (void)samples;
  return Error(absl::UnimplementedError("this kerncap-replay was built without the HSA path "
                                        "(ROCm HSA headers or LLVM 15 missing at build time)"),
               c.json);
#else
  if (bo != nullptr && bo->compare_original) {
    return Error(absl::UnimplementedError(
                     "--compare-original is not supported for HSA captures yet (bench the "
                     "variant and the captured code object in two runs)"),
                 c.json);
  }
  if (c.no_relocate || c.force_relocate || c.device >= 0) {
    std::cerr << "kerncap-replay: --device, --no-relocate and --force-relocate do not apply to "
                 "HSA replay (first GPU agent, original addresses only)\n";
  }
  hsa::HsaCliOptions ho;
  ho.runtime_path = c.hsa_runtime;
  ho.code_object_path = c.code_object;
  auto session = hsa::HsaCliSession::Open(**src, ho);
  if (!session.ok()) return Error(session.status(), c.json);
  hsa::HsaCliSession& hs = **session;
  const std::string cmd = command;
  if (cmd == "run") {
    auto info = hs.Run();
    if (!info.ok()) return Error(info.status(), c.json);
    if (c.json) {
      nlohmann::json j = ReplayInfoJson(*info);
      j["command"] = "run";
      j["platform"] = "hsa";
      j["hsa"] = hs.HsaJson();
      j["source"] = (*src)->origin();
      std::cout << j.dump(2) << std::endl;
    } else {
      std::cout << FormatReplayInfo(*info) << "launch: " << info->launch_ms << " ms\n";
    }
    return kExitPass;
  }
  if (cmd == "validate") {
    auto report = hs.Validate(*cmp);
    if (!report.ok()) return Error(report.status(), c.json);
    if (c.json) {
      nlohmann::json j = ValidationJson(*report);
      j["platform"] = "hsa";
      j["hsa"] = hs.HsaJson();
      j["source"] = (*src)->origin();
      std::cout << j.dump(2) << std::endl;
    } else {
      std::cout << FormatValidation(*report);
    }
    return report->passed() ? kExitPass : kExitFail;
  }
  hsa::HsaBenchOptions hb;
  hb.warmup = bo->warmup;
  hb.iterations = bo->iterations;
  hb.cold_l2 = bo->cold_l2;
  hb.restore_each = bo->restore_each;
  auto report = hs.Bench(hb);
  if (!report.ok()) return Error(report.status(), c.json);
  if (c.json) {
    nlohmann::json j = BenchJson(*report, samples);
    j["platform"] = "hsa";
    j["hsa"] = hs.HsaJson();
    j["source"] = (*src)->origin();
    std::cout << j.dump(2) << std::endl;
  } else {
    std::cout << FormatBench(*report);
  }
  return kExitPass;
#endif
}

int Main(int argc, char** argv) {
  CLI::App app{"kerncap-replay: restore a captured kernel dispatch at its original addresses, "
               "launch it, validate against the captured outputs, benchmark it."};
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 ok/pass, 1 validation failed or incomplete (bench: a timed binary did not "
      "validate before or after the timing), 2 usage, 3 replay error, 77 no CUDA driver or "
      "device (HSA: no usable runtime, ROCm < 6, or no GPU agent).");

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
      ->check(CLI::NonNegativeNumber);
  bench->add_option("--iterations", bo.iterations, "timed launches")->capture_default_str()
      ->check(CLI::PositiveNumber);
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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }

  if (std::optional<int> rc = serve_commands.Run()) return *rc;
  std::unique_ptr<CaptureSource> src;
  if (run->parsed()) {
    if (auto rc = MaybeHsa("run", run_c, &src, nullptr, nullptr, false)) return *rc;
    auto s = OpenSession(run_c, &src);
    if (!s.ok()) return Error(s.status(), run_c.json);
    auto ms = (*s)->Launch();
    if (!ms.ok()) return Error(ms.status(), run_c.json);
    if (run_c.json) {
      nlohmann::json j = ReplayInfoJson((*s)->info());
      j["command"] = "run";
      j["source"] = src->origin();  // kcap:<file> | store:<dir> | export
      std::cout << j.dump(2) << std::endl;
    } else {
      std::cout << FormatReplayInfo((*s)->info()) << "launch: " << *ms << " ms\n";
    }
    return kExitPass;
  }
  if (val->parsed()) {
    absl::StatusOr<CompareOptions> parsed = ParseCompareFlags(val_cmp);
    if (!parsed.ok()) {
      Error(parsed.status(), val_c.json);
      return kExitUsage;
    }
    const CompareOptions& cmp = *parsed;
    if (auto rc = MaybeHsa("validate", val_c, &src, &cmp, nullptr, false)) return *rc;
    auto s = OpenSession(val_c, &src);
    if (!s.ok()) return Error(s.status(), val_c.json);
    auto report = (*s)->Validate(cmp);
    if (!report.ok()) return Error(report.status(), val_c.json);
    if (val_c.json) {
      nlohmann::json j = ValidationJson(*report);
      j["source"] = src->origin();
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
    // HSA cannot compare yet: MaybeHsa refuses an explicit --compare-original.
    bo.compare_original = compare_on;
    if (auto rc = MaybeHsa("bench", bench_c, &src, nullptr, &bo, samples)) return *rc;
    // CUDA: a variant is benched against the captured binary unless told not to.
    bo.compare_original = compare_on || (!compare_off && !bench_c.code_object.empty());
    auto s = OpenSession(bench_c, &src);
    if (!s.ok()) return Error(s.status(), bench_c.json);
    auto report = (*s)->Bench(bo);
    if (!report.ok()) return Error(report.status(), bench_c.json);
    if (bench_c.json) {
      nlohmann::json j = BenchJson(*report, samples);
      j["source"] = src->origin();
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
