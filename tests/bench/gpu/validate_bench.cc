// validate_bench (P8v, issue 15): how long `kerncap-replay validate` takes
// against its own restore, for a large capture, through both comparison
// paths in the same run. Builds a capture in-process (replay_test_util.h)
// holding --gib of device state (default 8): incompressible "weights" the
// kernel does not touch (1 GiB regions) and a written region of --written-pct
// percent of it (default 1) that add_one (testing::kAddOnePtx, JIT-loaded)
// increments; writes it as an uncompressed .kcap; then runs
//   kerncap-replay validate --json --compare-on=host   CAPTURE
//   kerncap-replay validate --json --compare-on=device CAPTURE
// and reports, per path, validate_seconds (restore + expected image + launch
// + comparison) / restore_seconds, with the sub-phases from the JSON
// (`comparison`). Target (issue 15): the device path's ratio <= 2.
//
// Prints a table and one "BENCH_JSON {...}" line; exits 77 ("SKIP: ...")
// without a usable GPU, 1 when a validation does not pass.
//   validate_bench [--gib=8] [--written-pct=1] [--replay=PATH/kerncap-replay] [--dir=SCRATCH]
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "reproducer/replay/core/replay_test_util.h"
#include "reproducer/replay/cuda/cuda_driver.h"
#include "reproducer/replay/testing/add_one_ptx.h"

namespace {

using nlohmann::json;
namespace v1 = kerncap::v1;

constexpr int kSkip = 77;
constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kChunk = 1ull << 20;

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

// Incompressible, never all-zero, different in every chunk (no dedup).
void Fill(std::string* s, uint64_t salt) {
  uint64_t* w = reinterpret_cast<uint64_t*>(s->data());
  for (uint64_t i = 0; i < s->size() / 8; ++i) {
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ salt;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    w[i] = x | 1;
  }
}

// Runs `cmd`, returns its stdout; *rc its exit status; *wall its seconds.
std::string RunCapture(const std::string& cmd, int* rc, double* wall) {
  const double t0 = Now();
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *rc = -1;
    return out;
  }
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  *wall = Now() - t0;
  return out;
}

int Run(int argc, char** argv) {
  const double gib = std::atof(Arg(argc, argv, "gib", "8").c_str());
  const double written_pct = std::atof(Arg(argc, argv, "written-pct", "1").c_str());
  const std::filesystem::path self = std::filesystem::absolute(argv[0]).parent_path();
  const std::string replay =
      Arg(argc, argv, "replay", (self.parent_path() / "bin" / "kerncap-replay").string());
  const std::filesystem::path dir =
      std::filesystem::path(Arg(argc, argv, "dir", std::filesystem::temp_directory_path())) /
      absl::StrCat("kc_validate_bench_", ::getpid());

  auto drv = kerncap::replay::CudaDriver::Get();
  int devices = 0;
  if (!drv.ok() || (*drv)->cuInit(0) != CUDA_SUCCESS ||
      (*drv)->cuDeviceGetCount(&devices) != CUDA_SUCCESS || devices == 0) {
    std::printf("SKIP: validate_bench: no CUDA driver or device\n");
    return kSkip;
  }
  if (::access(replay.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "FAIL: validate_bench: no kerncap-replay at %s (--replay=PATH)\n",
                 replay.c_str());
    return 1;
  }
  std::filesystem::create_directories(dir);

  // --- The capture ------------------------------------------------------------
  const double t_build = Now();
  const uint64_t total = static_cast<uint64_t>(gib * kGiB) & ~(kChunk - 1);
  const uint64_t written = std::max<uint64_t>(
      kChunk, static_cast<uint64_t>(total * written_pct / 100.0) & ~(kChunk - 1));
  const uint64_t weights = total > written ? total - written : 0;
  const uint32_t n = static_cast<uint32_t>(written / 8);
  constexpr uint64_t kTableVa = 0x7f4000000000, kDataVa = 0x7f4000200000;
  constexpr uint64_t kWeightsVa = 0x7f5000000000;
  kerncap::replay::testing::KcapBuilder b(static_cast<uint32_t>(kChunk));
  v1::CaptureManifest m;
  m.set_capture_id("cap-validate-bench");
  m.set_post_complete(true);
  m.mutable_kernel()->set_mangled_name("add_one");
  m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
  auto add = [&](uint64_t va, const std::string& bytes) {
    v1::Region* r = m.mutable_pre()->add_regions();
    r->set_va(va);
    r->set_kind(v1::REGION_DEVICE);
    *r->mutable_data() = b.Add(bytes);
    return r;
  };
  std::string table(8, '\0');
  std::memcpy(table.data(), &kDataVa, 8);
  v1::Region* t = add(kTableVa, table);
  *m.mutable_post()->add_regions() = b.Diff(*t, table, table);
  {
    std::string data(written, '\0');
    Fill(&data, 1);
    std::string post = data;
    uint64_t* w = reinterpret_cast<uint64_t*>(post.data());
    for (uint64_t i = 0; i < n; ++i) w[i] += 1;
    v1::Region* d = add(kDataVa, data);
    *m.mutable_post()->add_regions() = b.Diff(*d, data, post);
  }
  uint64_t left = weights;
  for (uint64_t k = 0; left > 0; ++k) {
    std::string w(std::min(left, kGiB), '\0');
    Fill(&w, 100 + k);
    add(kWeightsVa + k * (kGiB + (64ull << 20)), w);  // unchanged: no post region
    left -= w.size();
  }
  v1::CodeObject* c = m.add_code_objects();
  c->set_format(v1::CODE_OBJECT_PTX);
  c->set_name("add_one.ptx");
  *c->mutable_data() = b.Add(kerncap::replay::testing::kAddOnePtx);
  m.mutable_launch()->add_grid((n + 255) / 256);
  m.mutable_launch()->add_block(256);
  std::string blob(12, '\0');
  std::memcpy(blob.data(), &kTableVa, 8);
  std::memcpy(blob.data() + 8, &n, 4);
  m.set_argument_blob(blob);
  for (uint32_t off : {0u, 8u}) {
    v1::Argument* a = m.add_arguments();
    a->set_offset(off);
    a->set_size(off == 0 ? 8 : 4);
  }
  const std::string kcap = (dir / "validate_bench.kcap").string();
  if (absl::Status st = b.Write(kcap, m, /*compress=*/false); !st.ok()) {
    std::fprintf(stderr, "FAIL: validate_bench: writing %s: %s\n", kcap.c_str(),
                 std::string(st.message()).c_str());
    return 1;
  }
  b.chunks().clear();
  std::printf("validate_bench: capture of %.2f GiB (%.1f MiB written by the kernel) built in "
              "%.1f s\n", static_cast<double>(total) / kGiB, static_cast<double>(written) / kChunk,
              Now() - t_build);

  // --- Both paths, same capture, same run ---------------------------------
  json result = {{"bench", "p8v_validate"},
                 {"gib", static_cast<double>(total) / kGiB},
                 {"written_bytes", written},
                 {"target_device_ratio", 2.0}};
  bool ok = true;
  std::printf("%-8s %10s %10s %10s %10s %10s %8s %s\n", "path", "validate", "restore", "expect",
              "launch", "compare", "ratio", "result");
  for (const char* path : {"host", "device"}) {
    int rc = 0;
    double wall = 0;
    const std::string out = RunCapture(
        absl::StrCat("'", replay, "' validate --json --compare-on=", path, " '", kcap,
                     "' 2>'", (dir / absl::StrCat(path, ".stderr")).string(), "'"),
        &rc, &wall);
    const json j = json::parse(out, nullptr, false);
    if (j.is_discarded() || !j.contains("validate_seconds")) {
      std::fprintf(stderr, "FAIL: validate_bench: --compare-on=%s exit %d, no JSON: %s\n", path,
                   rc, out.substr(0, 400).c_str());
      ok = false;
      continue;
    }
    const double v = j["validate_seconds"].get<double>();
    const double r = j["restore_seconds"].get<double>();
    const json& cmp = j["comparison"];
    const double ratio = r > 0 ? v / r : 0;
    std::printf("%-8s %9.3fs %9.3fs %9.3fs %8.2fms %9.3fs %8.2f %s (%s path)\n", path, v, r,
                cmp["expectation_seconds"].get<double>(), j["launch_ms"].get<double>(),
                cmp["compare_seconds"].get<double>(), ratio,
                j["result"].get<std::string>().c_str(), cmp["path"].get<std::string>().c_str());
    result[path] = {{"validate_seconds", v},
                    {"restore_seconds", r},
                    {"ratio", ratio},
                    {"wall_seconds", wall},
                    {"launch_ms", j["launch_ms"]},
                    {"result", j["result"]},
                    {"exit", rc},
                    {"comparison", cmp}};
    ok = ok && rc == 0 && j["result"] == "pass";
  }
  if (result.contains("device") && result.contains("host")) {
    result["device_ratio"] = result["device"]["ratio"];
    result["host_ratio"] = result["host"]["ratio"];
  }
  std::printf("BENCH_JSON %s\n", result.dump().c_str());
  std::filesystem::remove_all(dir);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
