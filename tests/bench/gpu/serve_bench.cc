// serve_bench (P5b): the per-candidate overhead of `kerncap-replay serve`,
// the resident mode for autotuners and kernel generators. Builds a capture
// in-process (replay_test_util.h) holding --gib of state (default 1) of one
// kernel, out[i] = (x[2i] + x[2i+1]) + y[i] with x half the state and y and
// out a quarter each; starts `kerncap-replay serve` on it; submits
// --candidates (default 20) evaluations of the same cubin, each validated
// and timed (--iterations, --warmup), and reports the server's overhead_ms
// (its wall time per evaluation minus the device time of every launch it
// made: loading and unloading the module, restoring the written quarter
// before each launch, the on-device comparison of the whole state) and the
// client's round trip. Target: median overhead <= 5 ms at 1 GiB on an H200.
// A second set with restore_each=false shows the restore's share.
//
// Prints a table and one "BENCH_JSON {...}" line; exits 77 ("SKIP: ...")
// without a usable GPU.
//   serve_bench [--gib=1] [--candidates=20] [--iterations=10] [--warmup=2]
//               [--replay=PATH/kerncap-replay] [--dir=SCRATCH]
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "reproducer/replay/cuda/cuda_driver.h"
#include "reproducer/replay/core/replay_test_util.h"
#include "reproducer/replay/serve/client.h"

extern char** environ;

namespace kerncap::replay::serve {
extern const unsigned char kServeBenchCubin[];
extern const unsigned long long kServeBenchCubinSize;
}  // namespace kerncap::replay::serve

namespace {

using kerncap::replay::serve::Client;
using nlohmann::json;
namespace v1 = kerncap::v1;

constexpr int kSkip = 77;

std::string Arg(int argc, char** argv, const char* name, const std::string& fallback) {
  const std::string prefix = absl::StrCat("--", name, "=");
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return argv[i] + prefix.size();
  }
  return fallback;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Integer-valued floats (sums are exact), neither zero-skipped nor deduplicated.
float Value(uint64_t i, uint64_t salt) {
  uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ salt;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return static_cast<float>(x % 4096) - 2048.0f;
}

pid_t g_server = -1;
void KillServer() {
  if (g_server > 0) {
    ::kill(g_server, SIGKILL);
    ::waitpid(g_server, nullptr, 0);
    g_server = -1;
  }
}

int Run(int argc, char** argv) {
  const double gib = std::atof(Arg(argc, argv, "gib", "1").c_str());
  const int candidates = std::atoi(Arg(argc, argv, "candidates", "20").c_str());
  const int iterations = std::atoi(Arg(argc, argv, "iterations", "10").c_str());
  const int warmup = std::atoi(Arg(argc, argv, "warmup", "2").c_str());
  const std::filesystem::path self = std::filesystem::absolute(argv[0]).parent_path();
  const std::string replay =
      Arg(argc, argv, "replay", (self.parent_path() / "bin" / "kerncap-replay").string());
  const std::filesystem::path dir =
      std::filesystem::path(Arg(argc, argv, "dir", std::filesystem::temp_directory_path())) /
      absl::StrCat("kc_serve_bench_", ::getpid());

  auto drv = kerncap::replay::CudaDriver::Get();
  int devices = 0;
  if (!drv.ok() || (*drv)->cuInit(0) != CUDA_SUCCESS ||
      (*drv)->cuDeviceGetCount(&devices) != CUDA_SUCCESS || devices == 0) {
    std::printf("SKIP: serve_bench: no CUDA driver or device\n");
    return kSkip;
  }
  CUdevice dev = 0;
  char name[256] = {};
  int major = 0;
  (*drv)->cuDeviceGet(&dev, 0);
  (*drv)->cuDeviceGetName(name, sizeof(name), dev);
  (*drv)->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  if (major != 9) {
    std::printf("SKIP: serve_bench: the embedded cubin is sm_90; %s is sm_%dx\n", name, major);
    return kSkip;
  }
  if (::access(replay.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "FAIL: serve_bench: no kerncap-replay at %s (--replay=PATH)\n",
                 replay.c_str());
    return 1;
  }
  std::filesystem::create_directories(dir);
  std::printf("serve_bench: %s, state %.2f GiB, %d candidates x (%d warm-up + %d timed)\n", name,
              gib, candidates, warmup, iterations);

  // --- The capture: x (1/2), y (1/4), out (1/4, written) ---------------------
  const double t_build = Now();
  const uint64_t quarter = static_cast<uint64_t>(gib * (1ull << 30) / 4) & ~uint64_t{0xfffff};
  const uint64_t n = quarter / 4;  // out elements
  constexpr uint64_t kXVa = 0x7f4000000000, kYVa = 0x7f5000000000, kOutVa = 0x7f6000000000;
  std::string x(2 * quarter, '\0'), y(quarter, '\0'), out(quarter, '\0'), post(quarter, '\0');
  {
    float* xf = reinterpret_cast<float*>(x.data());
    float* yf = reinterpret_cast<float*>(y.data());
    float* of = reinterpret_cast<float*>(out.data());
    float* pf = reinterpret_cast<float*>(post.data());
    for (uint64_t i = 0; i < 2 * n; ++i) xf[i] = Value(i, 1);
    for (uint64_t i = 0; i < n; ++i) {
      yf[i] = Value(i, 2);
      of[i] = Value(i, 3);
      pf[i] = (xf[2 * i] + xf[2 * i + 1]) + yf[i];
    }
  }
  const std::string cubin(reinterpret_cast<const char*>(kerncap::replay::serve::kServeBenchCubin),
                          kerncap::replay::serve::kServeBenchCubinSize);
  kerncap::replay::testing::KcapBuilder b(1 << 20);
  v1::CaptureManifest m;
  m.set_capture_id("cap-serve-bench");
  m.set_post_complete(true);
  m.mutable_kernel()->set_mangled_name("pair_sum");
  m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
  m.mutable_device()->set_arch("sm_90");
  auto add = [&](uint64_t va, const std::string& bytes) {
    v1::Region* r = m.mutable_pre()->add_regions();
    r->set_va(va);
    r->set_kind(v1::REGION_DEVICE);
    *r->mutable_data() = b.Add(bytes);
    return r;
  };
  add(kXVa, x);
  add(kYVa, y);
  v1::Region* o = add(kOutVa, out);
  *m.mutable_post()->add_regions() = b.Diff(*o, out, post);
  v1::CodeObject* c = m.add_code_objects();
  c->set_format(v1::CODE_OBJECT_CUBIN);
  c->set_name("serve_bench_kernel.cubin");
  *c->mutable_data() = b.Add(cubin);
  m.mutable_launch()->add_grid(132 * 16);
  m.mutable_launch()->add_block(256);
  std::string blob(32, '\0');
  std::memcpy(blob.data(), &kOutVa, 8);
  std::memcpy(blob.data() + 8, &kXVa, 8);
  std::memcpy(blob.data() + 16, &kYVa, 8);
  std::memcpy(blob.data() + 24, &n, 8);
  m.set_argument_blob(blob);
  for (uint32_t off = 0; off < 32; off += 8) {
    v1::Argument* a = m.add_arguments();
    a->set_offset(off);
    a->set_size(8);
  }
  const std::string kcap = (dir / "bench.kcap").string();
  if (absl::Status st = b.Write(kcap, m, /*compress=*/false); !st.ok()) {
    std::fprintf(stderr, "FAIL: serve_bench: writing %s: %s\n", kcap.c_str(),
                 std::string(st.message()).c_str());
    return 1;
  }
  x.clear(), x.shrink_to_fit(), y.clear(), y.shrink_to_fit();
  b.chunks().clear();
  const std::string cubin_path = (dir / "candidate.cubin").string();
  std::ofstream(cubin_path, std::ios::binary) << cubin;
  std::printf("capture: %.2f GiB of state (%llu MiB written by the kernel) built in %.1f s\n",
              4.0 * quarter / (1ull << 30), static_cast<unsigned long long>(quarter >> 20),
              Now() - t_build);

  // --- The server -------------------------------------------------------------
  const std::string sock = (dir / "serve.sock").string();
  std::vector<std::string> args = {replay, "serve", kcap, "--socket=" + sock};
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const double t_start = Now();
  if (::posix_spawn(&g_server, replay.c_str(), nullptr, nullptr, cargv.data(), environ) != 0) {
    std::fprintf(stderr, "FAIL: serve_bench: cannot start %s\n", replay.c_str());
    return 1;
  }
  std::unique_ptr<Client> client;
  while (Now() - t_start < 180) {
    int status = 0;
    if (::waitpid(g_server, &status, WNOHANG) == g_server) {
      g_server = -1;
      std::fprintf(stderr, "FAIL: serve_bench: kerncap-replay serve exited (status %d)\n",
                   status);
      return 1;
    }
    if (auto cl = Client::Connect(sock); cl.ok()) {
      client = std::move(*cl);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (client == nullptr) {
    std::fprintf(stderr, "FAIL: serve_bench: the server did not come up in 180 s\n");
    return 1;
  }
  const double startup_s = Now() - t_start;

  // --- Candidates ---------------------------------------------------------------
  struct Set {
    const char* label;
    json restore_each;
    int count;
    std::vector<double> overhead, wall, kernel, roundtrip;
    uint64_t restored = 0;
    bool passed = true;
  };
  std::vector<Set> sets = {{"default", nullptr, candidates, {}, {}, {}, {}},
                           {"no_restore_each", false, std::max(candidates / 4, 1), {}, {}, {}, {}}};
  for (Set& s : sets) {
    for (int i = 0; i < s.count; ++i) {
      json req = {{"op", "evaluate"},        {"id", i},
                  {"code_object_path", cubin_path}, {"iterations", iterations},
                  {"warmup", warmup}};
      if (!s.restore_each.is_null()) req["restore_each"] = s.restore_each;
      const double t0 = Now();
      auto a = client->Call(req, 120);
      const double rt = (Now() - t0) * 1e3;
      if (!a.ok() || !(*a).value("ok", false)) {
        std::fprintf(stderr, "FAIL: serve_bench: evaluation %d: %s\n", i,
                     a.ok() ? a->dump().c_str() : std::string(a.status().message()).c_str());
        KillServer();
        return 1;
      }
      s.passed &= (*a)["validation"]["passed"].get<bool>();
      s.overhead.push_back((*a)["overhead_ms"].get<double>());
      s.wall.push_back((*a)["wall_ms"].get<double>());
      s.kernel.push_back((*a)["kernel_ms"]["median"].get<double>());
      s.roundtrip.push_back(rt);
      s.restored = (*a)["restored_bytes"].get<uint64_t>();
      if (i == 0 && &s == &sets[0]) std::printf("first answer: %s\n", a->dump().c_str());
    }
  }
  (void)client->Call({{"op", "shutdown"}}, 30);  // the exit status says the rest
  int status = 0;
  ::waitpid(g_server, &status, 0);
  g_server = -1;
  std::filesystem::remove_all(dir);

  json out_json = {{"bench", "p5b_serve"},
                   {"device", name},
                   {"state_gib", 4.0 * quarter / (1ull << 30)},
                   {"written_mib", quarter >> 20},
                   {"candidates", candidates},
                   {"iterations", iterations},
                   {"warmup", warmup},
                   {"startup_seconds", startup_s},
                   {"server_exit", WIFEXITED(status) ? WEXITSTATUS(status) : -1},
                   {"target_overhead_ms", 5.0}};
  std::printf("%-18s %12s %12s %12s %12s %14s %6s\n", "set", "overhead_ms", "(max)", "kernel_ms",
              "wall_ms", "roundtrip_ms", "pass");
  for (const Set& s : sets) {
    const double med = Median(s.overhead);
    std::printf("%-18s %12.3f %12.3f %12.4f %12.3f %14.3f %6s\n", s.label, med,
                *std::max_element(s.overhead.begin(), s.overhead.end()), Median(s.kernel),
                Median(s.wall), Median(s.roundtrip), s.passed ? "yes" : "NO");
    const std::string k = s.label;
    out_json[k + "_overhead_ms_median"] = med;
    out_json[k + "_overhead_ms_max"] = *std::max_element(s.overhead.begin(), s.overhead.end());
    out_json[k + "_kernel_ms_median"] = Median(s.kernel);
    out_json[k + "_wall_ms_median"] = Median(s.wall);
    out_json[k + "_roundtrip_ms_median"] = Median(s.roundtrip);
    out_json[k + "_restored_bytes_per_eval"] = s.restored;
    out_json[k + "_passed_all"] = s.passed;
  }
  out_json["overhead_ms_median"] = out_json["default_overhead_ms_median"];
  out_json["meets_target"] = out_json["default_overhead_ms_median"].get<double>() <= 5.0;
  std::printf("startup (restore + copies + comparator JIT): %.2f s; server exit %d\n", startup_s,
              out_json["server_exit"].get<int>());
  std::printf("BENCH_JSON %s\n", out_json.dump().c_str());
  return sets[0].passed && sets[1].passed ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const int rc = Run(argc, argv);
  KillServer();
  return rc;
}
