#include "reproducer/replay/serve/serve_cli.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cli_values.h"
#include "common/exit_codes.h"
#include "reproducer/replay/core/capture_source.h"
#include "reproducer/replay/cuda/cuda_driver.h"
#include "reproducer/replay/core/daemon_fetch.h"
#include "reproducer/replay/serve/client.h"
#include "reproducer/replay/serve/evaluator.h"
#include "reproducer/replay/serve/protocol.h"
#include "reproducer/replay/serve/resident_state.h"
#include "reproducer/replay/serve/server.h"

namespace kerncap::replay::serve {
namespace {

// The shared exit-code table (common/exit_codes.h, docs/EXIT_CODES.md).
constexpr int kExitPass = exit_code::kOk;
constexpr int kExitFail = exit_code::kMismatch;  // validation ran, outputs differ
constexpr int kExitUsage = exit_code::kUsage;
constexpr int kExitError = exit_code::kError;
constexpr int kExitNoDevice = exit_code::kNoDevice;

// kerncap-replay's convention (main.cc): no driver or device is a skip.
int ExitCodeFor(const absl::Status& s) {
  return IsNoCudaDeviceError(s) ? kExitNoDevice : kExitError;
}

int Fail(const char* command, const absl::Status& s) {
  std::cerr << "kerncap-replay " << command << ": " << s.message() << std::endl;
  return ExitCodeFor(s);
}

std::atomic<Server*> g_server{nullptr};

void OnSignal(int) {
  if (Server* s = g_server.load()) s->Stop();
}

std::string Number(const nlohmann::json& v) {
  if (v.is_number_float()) return absl::StrFormat("%.6g", v.get<double>());
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string HumanAnswer(const nlohmann::json& a) {
  std::string out;
  const nlohmann::json& k = a.value("kernel_ms", nlohmann::json::object());
  const bool validated = a.contains("validation");
  const std::string verdict =
      validated ? a["validation"].value("verdict", std::string("fail")) : std::string("done");
  absl::StrAppendFormat(&out, "%s  %s  kernel %.4f ms median (min %.4f, max %.4f, %d runs)  "
                              "overhead %.3f ms (wall %.3f ms)\n",
                        absl::AsciiStrToUpper(verdict),
                        a.value("kernel", std::string()), k.value("median", 0.0),
                        k.value("min", 0.0), k.value("max", 0.0), k.value("iterations", 0),
                        a.value("overhead_ms", 0.0), a.value("wall_ms", 0.0));
  if (a.contains("speedup")) {
    const nlohmann::json& o = a.value("original_ms", nlohmann::json::object());
    const nlohmann::json& sp = a.value("speedup_pairs", nlohmann::json::object());
    absl::StrAppendFormat(&out, "  original (captured) %.4f ms median (min %.4f, max %.4f)\n",
                          o.value("median", 0.0), o.value("min", 0.0), o.value("max", 0.0));
    absl::StrAppend(&out, "  speedup ", Number(a["speedup"]),
                    "x (original median / candidate median); per pair median ",
                    Number(sp.value("median", nlohmann::json(0.0))), "x, p10..p90 ",
                    Number(sp.value("p10", nlohmann::json(0.0))), "x..",
                    Number(sp.value("p90", nlohmann::json(0.0))), "x\n");
  }
  if (validated) {
    const nlohmann::json& v = a["validation"];
    absl::StrAppendFormat(&out, "  %d region(s) compared, %d failing\n",
                          v.value("regions_compared", 0), v.value("regions_failing", 0));
    for (const nlohmann::json& n : v.value("not_compared", nlohmann::json::array())) {
      absl::StrAppendFormat(&out, "  NOT COMPARED region %d at %s (%s%s%s): %s\n",
                            n.value("index", 0), n.value("va", std::string()),
                            n.value("kind", std::string()),
                            n.value("name", std::string()).empty() ? "" : " ",
                            n.value("name", std::string()), n.value("reason", std::string()));
    }
    auto after = [&out](const char* what, const nlohmann::json& s) {
      if (!s.is_object()) return;
      absl::StrAppendFormat(&out, "  %s: %s (%d failing)\n", what,
                            absl::AsciiStrToUpper(s.value("verdict", std::string("?"))),
                            s.value("regions_failing", 0));
    };
    if (a.contains("revalidation")) after("candidate after the timing", a["revalidation"]);
    if (a.contains("original_validation")) {
      after("original before the timing", a["original_validation"]["before"]);
      after("original after the timing", a["original_validation"]["after"]);
    }
    for (const nlohmann::json& r : v.value("regions", nlohmann::json::array())) {
      if (r.value("passed", true) && r.value("differing", 0) == 0) continue;
      absl::StrAppendFormat(&out, "  %s region %d at %s (%s%s%s, %d bytes, %s): %d mismatches, "
                                  "%d differing, worst abs %s, worst rel %s",
                            r.value("passed", true) ? "ok  " : "FAIL", r.value("index", 0),
                            r.value("va", std::string()), r.value("kind", std::string()),
                            r.value("name", std::string()).empty() ? "" : " ",
                            r.value("name", std::string()), r.value("size", 0),
                            r.value("written", false) ? "written" : "NOT written by the capture",
                            r.value("mismatches", 0), r.value("differing", 0),
                            Number(r["worst_abs"]), Number(r["worst_rel"]));
      if (r.contains("first_mismatch")) {
        absl::StrAppendFormat(&out, "; first at +%d: expected %s, got %s",
                              r.value("first_mismatch_offset", 0),
                              Number(r["first_mismatch"]["expected"]),
                              Number(r["first_mismatch"]["actual"]));
      }
      out += "\n";
    }
  }
  for (const nlohmann::json& w : a.value("warnings", nlohmann::json::array())) {
    absl::StrAppend(&out, "  warning: ", w.get<std::string>(), "\n");
  }
  return out;
}

}  // namespace

ServeCommands::ServeCommands(CLI::App* app) {
  serve_ = app->add_subcommand(
      "serve", "restore the capture once and evaluate candidate code objects sent over a Unix "
               "socket (resident mode; protocol: reproducer/replay/serve/protocol.h)");
  serve_->add_option("SOURCE", serve_args_.source, "capture file (.kcap), or an id with --daemon")
      ->required();
  serve_->add_option("--socket", serve_args_.socket, "Unix socket to serve on (created 0600)")
      ->required();
  serve_->add_option("--daemon", serve_args_.daemon, "read the capture from kerncapd at unix:PATH");
  serve_->add_option("--device", serve_args_.device, "GPU ordinal (default: the captured one)")
      ->check(cli::WholeNumber(0, std::numeric_limits<int>::max()));
  serve_->add_flag("--no-relocate", serve_args_.no_relocate,
                   "fail instead of relocating when an original address cannot be had");
  serve_->add_flag("--force-relocate", serve_args_.force_relocate,
                   "map everything at new addresses and patch pointers (tests the fallback)");

  submit_ = app->add_subcommand(
      "submit", "send one candidate to a running `kerncap-replay serve` and print the answer "
                "(exit 0 passed, 8 failed validation, 1 error: common/exit_codes.h)");
  SubmitArgs& s = submit_args_;
  submit_->add_option("--socket", s.socket, "the server's Unix socket")->required();
  submit_->add_option("CODE_OBJECT", s.code_object, "candidate cubin, fatbin or PTX");
  submit_->add_option("--kernel", s.kernel, "mangled kernel name (default: the captured one)");
  submit_->add_option("--iterations", s.iterations, "timed launches (0: validate only)")
      ->capture_default_str()
      ->check(cli::WholeNumber(0, kMaxIterations));
  submit_->add_option("--warmup", s.warmup, "untimed launches before them")
      ->capture_default_str()
      ->check(cli::WholeNumber(0, kMaxWarmup));
  submit_->add_flag("--no-validate", s.no_validate, "time only; no verdict");
  submit_->add_flag("--inline", s.inline_code,
                    "send the code object's bytes (base64) instead of its path");
  submit_->add_flag("--restore-each", s.restore_each,
                    "restore written regions before every timed launch (default: when the "
                    "kernel writes memory)");
  submit_->add_flag("--no-restore-each", s.no_restore_each, "never restore between launches")
      ->excludes("--restore-each");
  submit_->add_flag("--cold-l2", s.cold_l2,
                    "overwrite a buffer larger than L2 before every timed launch");
  submit_->add_flag("--compare-original", s.compare_original,
                    "also time the captured code object, interleaved with the candidate, and "
                    "print the speedup");
  submit_->add_option("--launch", s.launch_json,
                      "launch overrides for this candidate, as JSON: {\"grid\":[64,1,1], "
                      "\"block\":[128], \"shared_mem_bytes\":0, \"max_dynamic_shared_mem\":0, "
                      "\"cache_preference\":\"l1\", \"cluster\":[2]} (any subset)");
  submit_->add_option("--dtype", s.dtype, "element type of every region (f32, f16, bf16, ...)");
  submit_->add_option("--region-dtype", s.region_dtypes, "SEL:DTYPE for one region (repeatable)");
  submit_->add_option("--atol", s.atol, "absolute tolerance")->check(cli::Number(0));
  submit_->add_option("--rtol", s.rtol, "relative tolerance")->check(cli::Number(0));
  submit_->add_option("--ulp", s.ulp, "tolerance in units in the last place")
      ->check(cli::WholeNumber(0, std::numeric_limits<long long>::max()));
  submit_->add_flag("--nan-unequal", s.nan_unequal, "a NaN never matches");
  submit_->add_flag("--json", s.json, "print the server's answer as JSON");
  submit_->add_flag("--info", s.info, "ask what is being served instead");
  submit_->add_flag("--shutdown", s.shutdown, "stop the server instead");
  submit_->add_option("--timeout", s.timeout, "seconds to wait for the answer (0: no limit)")
      ->check(cli::WholeNumber(0, std::numeric_limits<int>::max()));
}

std::optional<int> ServeCommands::Run() {
  if (serve_->parsed()) return Serve();
  if (submit_->parsed()) return Submit();
  return std::nullopt;
}

int ServeCommands::Serve() {
  const auto& a = serve_args_;
  absl::StatusOr<std::unique_ptr<CaptureSource>> src;
  if (a.daemon.empty()) {
    src = CaptureSource::OpenKcap(a.source);
  } else {
    const std::string tmp = (std::filesystem::temp_directory_path() /
                             absl::StrCat("kerncap-serve-", ::getpid(), ".kcap"))
                                .string();
    absl::StatusOr<std::string> id = FetchCaptureFromDaemon(a.daemon, a.source, tmp);
    src = id.ok() ? CaptureSource::OpenKcap(tmp, /*unlink_after_open=*/true)
                  : absl::StatusOr<std::unique_ptr<CaptureSource>>(id.status());
    if (!id.ok()) std::filesystem::remove(tmp);
  }
  if (!src.ok()) return Fail("serve", src.status());
  SessionOptions so;
  so.device = a.device;
  so.allow_relocation = !a.no_relocate;
  so.force_relocation = a.force_relocate;
  absl::StatusOr<std::unique_ptr<ResidentState>> state = ResidentState::Create(src->get(), so);
  if (!state.ok()) return Fail("serve", state.status());
  absl::StatusOr<std::unique_ptr<ResidentEvaluator>> evaluator =
      ResidentEvaluator::Create(state->get());
  if (!evaluator.ok()) return Fail("serve", evaluator.status());
  // The socket appears only now: its existence means "ready".
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Listen(ServerOptions{a.socket});
  if (!server.ok()) return Fail("serve", server.status());

  nlohmann::json ready = (*evaluator)->Info();
  ready["serving"] = a.socket;
  std::cout << ToLine(ready) << std::flush;
  std::cerr << "kerncap-replay serve: " << ready.value("capture_id", std::string()) << " ("
            << ready.value("kernel", std::string()) << ", "
            << ready.value("state_bytes", uint64_t{0}) << " bytes in "
            << ready.value("regions", 0) << " regions) ready on " << a.socket << " after "
            << absl::StrFormat("%.2f", ready.value("startup_seconds", 0.0)) << " s" << std::endl;

  g_server = server->get();
  struct sigaction sa = {}, old_term = {}, old_int = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, &old_term);
  ::sigaction(SIGINT, &sa, &old_int);
  const absl::Status st = (*server)->Serve(**evaluator);
  ::sigaction(SIGTERM, &old_term, nullptr);
  ::sigaction(SIGINT, &old_int, nullptr);
  g_server = nullptr;
  const uint64_t served = (*server)->requests_served();
  server->reset();  // removes the socket first: nobody connects to a dying server
  if (!st.ok()) return Fail("serve", st);
  std::cerr << "kerncap-replay serve: stopped after " << served << " request(s)" << std::endl;
  return kExitPass;
}

int ServeCommands::Submit() {
  const SubmitArgs& s = submit_args_;
  nlohmann::json request;
  if (s.info || s.shutdown) {
    if (s.info && s.shutdown) {
      std::cerr << "kerncap-replay submit: --info and --shutdown exclude each other\n";
      return kExitUsage;
    }
    request = {{"op", s.info ? "info" : "shutdown"}};
  } else {
    if (s.code_object.empty()) {
      std::cerr << "kerncap-replay submit: CODE_OBJECT is required (or --info / --shutdown)\n";
      return kExitUsage;
    }
    EvaluateRequest r;
    if (s.inline_code) {
      std::ifstream f(s.code_object, std::ios::binary);
      if (!f) {
        std::cerr << "kerncap-replay submit: cannot read " << s.code_object << "\n";
        return kExitError;
      }
      std::ostringstream ss;
      ss << f.rdbuf();
      r.code_object = ss.str();
    } else {
      std::error_code ec;
      std::filesystem::path p = std::filesystem::absolute(s.code_object, ec);
      r.code_object_path = ec ? s.code_object : p.string();
    }
    r.kernel = s.kernel;
    r.iterations = s.iterations;
    r.warmup = s.warmup;
    r.validate = !s.no_validate;
    if (s.restore_each) r.restore_each = true;
    if (s.no_restore_each) r.restore_each = false;
    r.compare_original = s.compare_original;
    r.cold_l2 = s.cold_l2;
    if (!s.launch_json.empty()) {
      nlohmann::json lj = nlohmann::json::parse(s.launch_json, nullptr, false);
      absl::StatusOr<LaunchOverride> lo =
          lj.is_discarded() ? absl::InvalidArgumentError("--launch is not JSON")
                            : LaunchOverrideFromJson(lj);
      if (!lo.ok()) {
        std::cerr << "kerncap-replay submit: " << lo.status().message() << "\n";
        return kExitUsage;
      }
      r.launch = *lo;
    }
    nlohmann::json& t = r.tolerance_json;
    if (!s.dtype.empty()) t["dtype"] = s.dtype;
    if (!s.region_dtypes.empty()) t["region_dtype"] = s.region_dtypes;
    if (s.atol >= 0) t["atol"] = s.atol;
    if (s.rtol >= 0) t["rtol"] = s.rtol;
    if (s.ulp >= 0) t["ulp"] = s.ulp;
    if (s.nan_unequal) t["nan_unequal"] = true;
    if (absl::StatusOr<CompareOptions> c = ParseTolerance(t); !c.ok()) {
      std::cerr << "kerncap-replay submit: " << c.status().message() << "\n";
      return kExitUsage;
    }
    request = EvaluateRequestJson(r, nullptr);
  }
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(s.socket);
  if (!client.ok()) return Fail("submit", client.status());
  absl::StatusOr<nlohmann::json> answer = (*client)->Call(request, s.timeout);
  if (!answer.ok()) return Fail("submit", answer.status());
  const nlohmann::json& a = *answer;
  const bool ok = a.value("ok", false);
  if (s.json) {
    std::cout << a.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  } else if (!ok) {
    std::cerr << "kerncap-replay submit: " << a.value("error", std::string("unknown error"))
              << (a.value("context_lost", false) ? " [the server has stopped]" : "") << std::endl;
  } else if (s.info || s.shutdown) {
    std::cout << a.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  } else {
    std::cout << HumanAnswer(a);
  }
  if (!ok) return kExitError;
  // Any verdict but "pass" (before or after the timing) is a failure.
  if (a.contains("validation") && !a.value("verdicts_pass", false)) return kExitFail;
  return kExitPass;
}

}  // namespace kerncap::replay::serve
