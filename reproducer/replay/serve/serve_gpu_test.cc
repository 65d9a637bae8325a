// GPU test of `kerncap-replay serve` / `submit` (ctest label gpu): a small
// capture built in-process (replay_test_util.h) of scale_add
// (testdata/serve_test_kernels.cu), served by the real binary, fed the
// embedded candidate variants: the original (passes), a wrong one (fails,
// naming the output region), faster and slower ones, one that clobbers its
// input, one that lacks the kernel, garbage, PTX, and one that faults (the
// server must say the context is lost and exit non-zero). Also checks the
// device comparison kernel against the host comparator on tricky data.
// Skips without libcuda.so.1, a device, or an sm_90 GPU (the cubins').
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "reproducer/replay/core/comparator.h"
#include "reproducer/replay/cuda/cuda_driver.h"
#include "reproducer/replay/core/replay_test_util.h"
#include "reproducer/replay/serve/client.h"
#include "reproducer/replay/cuda/device_comparator.h"

extern char** environ;

namespace kerncap::replay::serve {

// Embedded at build time (CMakeLists.txt).
#define KC_DECLARE_CUBIN(v)                   \
  extern const unsigned char kServeTestCubin_##v[]; \
  extern const unsigned long long kServeTestCubin_##v##Size;
KC_DECLARE_CUBIN(orig)
KC_DECLARE_CUBIN(fast)
KC_DECLARE_CUBIN(slow)
KC_DECLARE_CUBIN(wrong)
KC_DECLARE_CUBIN(clobber)
KC_DECLARE_CUBIN(fault)
KC_DECLARE_CUBIN(renamed)
KC_DECLARE_CUBIN(nobias)
extern const unsigned char kServeTestPtx_orig[];
extern const unsigned long long kServeTestPtx_origSize;

namespace {

using nlohmann::json;

constexpr uint64_t kOutVa = 0x7f3b00000000;
constexpr uint64_t kInVa = 0x7f3b00400000;
constexpr uint64_t kByVa = 0x7f3b00800000;  // untouched by every correct variant
constexpr uint64_t kBiasVa = 0x7f3c00000000;
constexpr uint32_t kN = 1u << 20;

std::string Bytes(const unsigned char* p, unsigned long long n) {
  return std::string(reinterpret_cast<const char*>(p), n);
}

// Skip reason, or empty when an sm_90 GPU is usable.
std::string GpuSkipReason() {
  auto drv = CudaDriver::Get();
  if (!drv.ok()) return absl::StrCat("no GPU: ", drv.status().message());
  CUresult r = (*drv)->cuInit(0);
  int n = 0;
  if (r != CUDA_SUCCESS || (*drv)->cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0) {
    return absl::StrCat("no GPU: cuInit: ", (*drv)->ErrorText(r));
  }
  CUdevice d = 0;
  int major = 0;
  (*drv)->cuDeviceGet(&d, 0);
  (*drv)->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d);
  if (major != 9) return absl::StrCat("the test cubins are sm_90; device 0 is sm_", major, "x");
  return "";
}

class ServeGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string skip = GpuSkipReason();
    if (!skip.empty()) GTEST_SKIP() << skip;
    const char* build = std::getenv("KERNCAP_BUILD_DIR");
    replay_ = absl::StrCat(build != nullptr ? build : ".", "/bin/kerncap-replay");
    if (::access(replay_.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << replay_;
    dir_ = std::filesystem::temp_directory_path() / absl::StrCat("kc_serve_gpu_", ::getpid());
    std::filesystem::create_directories(dir_);
    socket_ = (dir_ / "serve.sock").string();
    WriteCapture();
    for (const auto& [name, bytes] : Candidates()) {
      std::ofstream(dir_ / name, std::ios::binary) << bytes;
    }
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  static std::vector<std::pair<std::string, std::string>> Candidates() {
    return {{"orig.cubin", Bytes(kServeTestCubin_orig, kServeTestCubin_origSize)},
            {"fast.cubin", Bytes(kServeTestCubin_fast, kServeTestCubin_fastSize)},
            {"slow.cubin", Bytes(kServeTestCubin_slow, kServeTestCubin_slowSize)},
            {"wrong.cubin", Bytes(kServeTestCubin_wrong, kServeTestCubin_wrongSize)},
            {"clobber.cubin", Bytes(kServeTestCubin_clobber, kServeTestCubin_clobberSize)},
            {"fault.cubin", Bytes(kServeTestCubin_fault, kServeTestCubin_faultSize)},
            {"renamed.cubin", Bytes(kServeTestCubin_renamed, kServeTestCubin_renamedSize)},
            {"nobias.cubin", Bytes(kServeTestCubin_nobias, kServeTestCubin_nobiasSize)},
            {"orig.ptx", Bytes(kServeTestPtx_orig, kServeTestPtx_origSize)}};
  }

  void WriteCapture() {
    testing::KcapBuilder b(1 << 20);
    std::string in(kN * 4, '\0'), out(kN * 4, '\0'), post(kN * 4, '\0'), by(1 << 20, '\0');
    for (uint32_t i = 0; i < kN; ++i) {
      const float x = static_cast<float>(i % 1000), o = -1.0f, y = 2.0f * x + 1.0f;
      std::memcpy(in.data() + i * 4, &x, 4);
      std::memcpy(out.data() + i * 4, &o, 4);
      std::memcpy(post.data() + i * 4, &y, 4);
    }
    for (size_t i = 0; i < by.size(); ++i) by[i] = static_cast<char>(i * 7 + 3);
    const float bias = 1.0f;
    std::string bias_bytes(4, '\0');
    std::memcpy(bias_bytes.data(), &bias, 4);

    v1::CaptureManifest m;
    m.set_capture_id("cap-serve-selftest");
    m.set_post_complete(true);
    m.mutable_kernel()->set_mangled_name("scale_add");
    m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
    auto add = [&](uint64_t va, v1::RegionKind kind, const std::string& bytes) {
      v1::Region* r = m.mutable_pre()->add_regions();
      r->set_va(va);
      r->set_kind(kind);
      *r->mutable_data() = b.Add(bytes);
      return r;
    };
    v1::Region* o = add(kOutVa, v1::REGION_DEVICE, out);
    add(kInVa, v1::REGION_DEVICE, in);
    add(kByVa, v1::REGION_DEVICE, by);
    add(kBiasVa, v1::REGION_MODULE_GLOBAL, bias_bytes)->set_name("kc_bias");
    *m.mutable_post()->add_regions() = b.Diff(*o, out, post);
    v1::CodeObject* c = m.add_code_objects();
    c->set_format(v1::CODE_OBJECT_CUBIN);
    c->set_name("serve_test.cubin");
    *c->mutable_data() = b.Add(Bytes(kServeTestCubin_orig, kServeTestCubin_origSize));
    m.mutable_device()->set_arch("sm_90");
    m.mutable_launch()->add_grid((kN + 255) / 256);
    m.mutable_launch()->add_block(256);
    std::string blob(20, '\0');
    std::memcpy(blob.data(), &kOutVa, 8);
    std::memcpy(blob.data() + 8, &kInVa, 8);
    std::memcpy(blob.data() + 16, &kN, 4);
    m.set_argument_blob(blob);
    for (uint32_t off : {0u, 8u, 16u}) {
      v1::Argument* a = m.add_arguments();
      a->set_offset(off);
      a->set_size(off == 16 ? 4 : 8);
    }
    kcap_ = (dir_ / "serve.kcap").string();
    ASSERT_TRUE(b.Write(kcap_, m).ok());
  }

  // Starts `kerncap-replay serve` and waits until its socket answers.
  void StartServer(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {replay_, "serve", kcap_, "--socket=" + socket_};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ASSERT_EQ(::posix_spawn(&pid_, replay_.c_str(), nullptr, nullptr, argv.data(), environ), 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        ASSERT_TRUE(false) << "kerncap-replay serve exited early (status " << status << ")";
      }
      if (auto c = Client::Connect(socket_); c.ok()) {
        client_ = std::move(*c);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "kerncap-replay serve did not come up within 120 s";
  }

  // Waits for the server to exit; its exit code.
  int WaitServer() {
    client_.reset();
    int status = 0;
    for (int i = 0; i < 600 && pid_ > 0; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

  json Evaluate(const std::string& file, json extra = json::object()) {
    json req = {{"op", "evaluate"},
                {"code_object_path", (dir_ / file).string()},
                {"iterations", 5},
                {"warmup", 1}};
    req.update(extra);
    auto a = client_->Call(req, 120);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? *a : json::object();
  }

  // The verdict of region `va` in an answer (null when not listed).
  static json Region(const json& answer, uint64_t va) {
    for (const json& r : answer["validation"]["regions"]) {
      if (r["va"] == absl::StrCat("0x", absl::Hex(va))) return r;
    }
    return nullptr;
  }

  int Submit(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {replay_, "submit", "--socket=" + socket_};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (::posix_spawn(&pid, replay_.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
      return -1;
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string replay_, socket_, kcap_;
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  std::unique_ptr<Client> client_;
};

TEST_F(ServeGpuTest, EvaluatesCandidates) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  auto info = client_->Call({{"op", "info"}});
  ASSERT_TRUE(info.ok()) << info.status();
  std::fprintf(stderr, "info: %s\n", info->dump().c_str());
  EXPECT_TRUE((*info)["ok"].get<bool>());
  EXPECT_EQ((*info)["regions"], 4);
  EXPECT_EQ((*info)["written_regions"], 1);
  EXPECT_EQ((*info)["module_variables"], 1);

  // The original passes; the captured bias (1.0) was restored into its module.
  json orig = Evaluate("orig.cubin");
  std::fprintf(stderr, "orig: %s\n", orig.dump().c_str());
  ASSERT_TRUE(orig["ok"].get<bool>()) << orig.dump();
  EXPECT_TRUE(orig["validation"]["passed"].get<bool>()) << orig.dump();
  EXPECT_EQ(orig["validation"]["regions_compared"], 4);
  ASSERT_FALSE(Region(orig, kOutVa).is_null());
  EXPECT_EQ(Region(orig, kOutVa)["mismatches"], 0);
  EXPECT_EQ(orig["kernel_ms"]["iterations"], 5);
  const double orig_ms = orig["kernel_ms"]["median"].get<double>();
  EXPECT_GT(orig["overhead_ms"].get<double>(), 0.0);

  // Wrong: fails, naming the output region. Bytewise by default: 15.0f and
  // 16.0f (0x41700000, 0x41800000) differ in byte 2 of element 7 only.
  json wrong = Evaluate("wrong.cubin");
  ASSERT_TRUE(wrong["ok"].get<bool>()) << wrong.dump();
  EXPECT_FALSE(wrong["validation"]["passed"].get<bool>());
  EXPECT_EQ(wrong["validation"]["regions_failing"], 1);
  json out = Region(wrong, kOutVa);
  ASSERT_FALSE(out.is_null()) << wrong.dump();
  EXPECT_FALSE(out["passed"].get<bool>());
  EXPECT_EQ(out["dtype"], "bytes");
  EXPECT_EQ(out["mismatches"], (kN - 8) / 1000 + 1);
  EXPECT_EQ(out["first_mismatch_offset"], 7 * 4 + 2);
  EXPECT_EQ(out["first_mismatch"]["expected"], 0x70);
  EXPECT_EQ(out["first_mismatch"]["actual"], 0x80);
  // As f32: the first bad element (i = 7) and its values.
  json wrong_f32 = Evaluate("wrong.cubin", {{"tolerance", {{"dtype", "f32"}}}});
  out = Region(wrong_f32, kOutVa);
  ASSERT_FALSE(out.is_null()) << wrong_f32.dump();
  EXPECT_EQ(out["dtype"], "f32");
  EXPECT_EQ(out["mismatches"], (kN - 8) / 1000 + 1);
  EXPECT_EQ(out["first_mismatch_offset"], 7 * 4);
  EXPECT_EQ(out["first_mismatch"]["expected"], 15.0);
  EXPECT_EQ(out["first_mismatch"]["actual"], 16.0);
  EXPECT_EQ(out["worst_abs"], 1.0);
  // ... unless the tolerance allows the difference (1.0).
  json tolerant = Evaluate("wrong.cubin", {{"tolerance", {{"dtype", "f32"}, {"atol", 1.5}}}});
  EXPECT_TRUE(tolerant["validation"]["passed"].get<bool>()) << tolerant.dump();
  EXPECT_EQ(Region(tolerant, kOutVa)["worst_abs"], 1.0);

  // Faster and slower variants (inline bytes for one of them).
  json fast = client_->Call({{"op", "evaluate"},
                             {"code_object_b64",
                              absl::Base64Escape(Bytes(kServeTestCubin_fast,
                                                       kServeTestCubin_fastSize))},
                             {"iterations", 5}})
                  .value_or(json::object());
  ASSERT_TRUE(fast.value("ok", false)) << fast.dump();
  EXPECT_TRUE(fast["validation"]["passed"].get<bool>());
  json slow = Evaluate("slow.cubin");
  EXPECT_TRUE(slow["validation"]["passed"].get<bool>());
  const double fast_ms = fast["kernel_ms"]["median"].get<double>();
  const double slow_ms = slow["kernel_ms"]["median"].get<double>();
  std::fprintf(stderr, "kernel ms: fast %.4f orig %.4f slow %.4f\n", fast_ms, orig_ms, slow_ms);
  EXPECT_LT(fast_ms, orig_ms);
  EXPECT_GT(slow_ms, orig_ms);

  // compare_original: the captured binary timed in the same request,
  // interleaved with the candidate (its module variable restored as well).
  json vs_slow = Evaluate("slow.cubin", {{"compare_original", true}, {"iterations", 10}});
  std::fprintf(stderr, "slow vs original: %s\n", vs_slow.dump().c_str());
  ASSERT_TRUE(vs_slow.value("ok", false)) << vs_slow.dump();
  EXPECT_TRUE(vs_slow["validation"]["passed"].get<bool>());
  EXPECT_EQ(vs_slow["kernel_ms"]["iterations"], 10);
  EXPECT_EQ(vs_slow["original_ms"]["iterations"], 10);
  EXPECT_GT(vs_slow["original_ms"]["median"].get<double>(), 0.0);
  EXPECT_LT(vs_slow["speedup"].get<double>(), 1.0);
  EXPECT_EQ(vs_slow["speedup_pairs"]["pairs"], 10);
  json vs_fast = Evaluate("fast.cubin", {{"compare_original", true}, {"iterations", 10}});
  ASSERT_TRUE(vs_fast.value("ok", false)) << vs_fast.dump();
  EXPECT_GT(vs_fast["speedup"].get<double>(), 1.0) << vs_fast.dump();
  json vs_orig = Evaluate("orig.cubin", {{"compare_original", true}, {"iterations", 20}});
  ASSERT_TRUE(vs_orig.value("ok", false)) << vs_orig.dump();
  EXPECT_GT(vs_orig["speedup"].get<double>(), 0.7) << vs_orig.dump();
  EXPECT_LT(vs_orig["speedup"].get<double>(), 1.4) << vs_orig.dump();
  EXPECT_FALSE(Evaluate("orig.cubin").contains("speedup"));

  // Clobbering the input fails, naming the input; the next candidate finds
  // the input restored.
  json clobber = Evaluate("clobber.cubin");
  EXPECT_FALSE(clobber["validation"]["passed"].get<bool>()) << clobber.dump();
  json in = Region(clobber, kInVa);
  ASSERT_FALSE(in.is_null()) << clobber.dump();
  EXPECT_FALSE(in["passed"].get<bool>());
  EXPECT_FALSE(in["written"].get<bool>());
  EXPECT_TRUE(Region(clobber, kOutVa)["passed"].get<bool>());
  EXPECT_TRUE(Evaluate("orig.cubin", {{"iterations", 1}})["validation"]["passed"].get<bool>());

  // Clear errors, and the server keeps serving.
  json renamed = Evaluate("renamed.cubin");
  EXPECT_FALSE(renamed["ok"].get<bool>());
  EXPECT_NE(renamed["error"].get<std::string>().find("has no kernel 'scale_add'"),
            std::string::npos)
      << renamed.dump();
  json named = Evaluate("renamed.cubin", {{"kernel", "scale_add_v2"}});
  EXPECT_TRUE(named["validation"]["passed"].get<bool>()) << named.dump();
  auto garbage = client_->Call({{"op", "evaluate"}, {"code_object_b64", "aGVsbG8gd29ybGQ="}});
  ASSERT_TRUE(garbage.ok());
  EXPECT_FALSE((*garbage)["ok"].get<bool>());
  EXPECT_NE((*garbage)["error"].get<std::string>().find("neither a cubin"), std::string::npos);
  json missing = Evaluate("no-such.cubin");
  EXPECT_FALSE(missing["ok"].get<bool>());

  // PTX: the driver JIT-compiles it.
  json ptx = Evaluate("orig.ptx", {{"iterations", 1}});
  EXPECT_TRUE(ptx["validation"]["passed"].get<bool>()) << ptx.dump();

  // The command-line client's exit codes.
  EXPECT_EQ(Submit({(dir_ / "orig.cubin").string(), "--iterations=2"}), 0);
  // (common/exit_codes.h: 8 outputs differ, 1 error)
  EXPECT_EQ(Submit({(dir_ / "wrong.cubin").string(), "--iterations=1"}), 8);
  EXPECT_EQ(Submit({(dir_ / "renamed.cubin").string(), "--json"}), 1);
  EXPECT_EQ(Submit({(dir_ / "wrong.cubin").string(), "--inline", "--dtype=f32", "--atol=2"}), 0);

  auto bye = client_->Call({{"op", "shutdown"}});
  ASSERT_TRUE(bye.ok());
  EXPECT_TRUE((*bye)["ok"].get<bool>());
  EXPECT_EQ(WaitServer(), 0);
  EXPECT_FALSE(std::filesystem::exists(socket_));
}

// Verdicts that cover everything: a candidate without the captured module
// variable is "incomplete" (never passed); every timed candidate is validated
// again after the timing; the timing runs with the persisting L2 reset and,
// when asked, a cold L2.
TEST_F(ServeGpuTest, VerdictsAfterTheTimingAndWhatWasNotCompared) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  json orig = Evaluate("orig.cubin", {{"cold_l2", true}, {"compare_original", true}});
  std::fprintf(stderr, "orig, cold L2, vs original: %s\n", orig.dump().c_str());
  ASSERT_TRUE(orig.value("ok", false)) << orig.dump();
  EXPECT_EQ(orig["validation"]["verdict"], "pass");
  EXPECT_EQ(orig["revalidation"]["verdict"], "pass");
  EXPECT_EQ(orig["original_validation"]["before"]["verdict"], "pass");
  EXPECT_EQ(orig["original_validation"]["after"]["verdict"], "pass");
  EXPECT_EQ(orig["verdicts_pass"], true);
  EXPECT_EQ(orig["cold_l2"], true);
  EXPECT_GE(orig["l2_flush_bytes"].get<uint64_t>(), 64u << 20);
  EXPECT_EQ(orig["persisting_l2"]["limit_during_bytes"], 0);
  EXPECT_GT(orig["speedup"].get<double>(), 0.7);  // the captured binary against itself
  EXPECT_LT(orig["speedup"].get<double>(), 1.4);

  json nobias = Evaluate("nobias.cubin");
  std::fprintf(stderr, "nobias: %s\n", nobias.dump().c_str());
  ASSERT_TRUE(nobias.value("ok", false)) << nobias.dump();
  // kc_bias is unchanged by the captured dispatch and nothing captured
  // points into it: a candidate without it cannot reach it, so its correct
  // outputs pass, with kc_bias listed as unreachable (pointer_scan.h).
  EXPECT_EQ(nobias["validation"]["verdict"], "pass") << nobias.dump();
  EXPECT_TRUE(nobias["validation"]["not_compared"].empty());
  ASSERT_EQ(nobias["validation"]["unreachable"].size(), 1u);
  EXPECT_EQ(nobias["validation"]["unreachable"][0]["name"], "kc_bias");
  EXPECT_EQ(nobias["verdicts_pass"], true);
  EXPECT_EQ(Submit({(dir_ / "nobias.cubin").string(), "--iterations=1"}), 0);

  ASSERT_TRUE(client_->Call({{"op", "shutdown"}}).ok());
  EXPECT_EQ(WaitServer(), 0);
}

// Per-request launch overrides on the GPU: scale_add is one thread per
// element, so a covering launch validates, a short grid is launch-shape
// dependent (the captured code fails there too), a wrong candidate at a
// covering launch fails, and an impossible block is an error for that
// request only.
TEST_F(ServeGpuTest, LaunchOverridesPerRequest) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  json covering = Evaluate("fast.cubin", {{"launch", {{"block", {128}}, {"grid", {(kN + 127) / 128}}}},
                                          {"iterations", 5}});
  ASSERT_TRUE(covering["ok"].get<bool>()) << covering.dump();
  EXPECT_EQ(covering["validation"]["verdict"], "pass") << covering.dump();
  EXPECT_TRUE(covering["verdicts_pass"].get<bool>());
  EXPECT_EQ(covering["launch"], absl::StrCat("grid=(", (kN + 127) / 128, ",1,1) block=(128,1,1) smem=0"));
  json short_grid = Evaluate("fast.cubin", {{"launch", {{"grid", {4}}}}, {"iterations", 0}});
  ASSERT_TRUE(short_grid["ok"].get<bool>()) << short_grid.dump();
  EXPECT_EQ(short_grid["validation"]["verdict"], "launch_shape_dependent") << short_grid.dump();
  EXPECT_EQ(short_grid["validation"]["shape_probe"]["captured_code_at_captured_launch"], "pass");
  json wrong = Evaluate("wrong.cubin", {{"launch", {{"block", {512}}, {"grid", {(kN + 511) / 512}}}},
                                        {"iterations", 0}});
  ASSERT_TRUE(wrong["ok"].get<bool>()) << wrong.dump();
  EXPECT_EQ(wrong["validation"]["verdict"], "fail") << wrong.dump();
  json too_big = Evaluate("fast.cubin", {{"launch", {{"block", {4096}}}}});
  EXPECT_FALSE(too_big["ok"].get<bool>()) << too_big.dump();
  EXPECT_EQ(too_big["code"], "INVALID_ARGUMENT");
  // The captured launch again without "launch"; the server is still serving.
  json plain = Evaluate("orig.cubin", {{"iterations", 1}});
  EXPECT_EQ(plain["validation"]["verdict"], "pass") << plain.dump();
  EXPECT_FALSE(plain.contains("launch"));
}

TEST_F(ServeGpuTest, FaultingCandidateStopsTheServer) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  EXPECT_TRUE(Evaluate("orig.cubin", {{"iterations", 1}})["validation"]["passed"].get<bool>());
  json fault = Evaluate("fault.cubin");
  std::fprintf(stderr, "fault: %s\n", fault.dump().c_str());
  EXPECT_FALSE(fault["ok"].get<bool>());
  EXPECT_TRUE(fault.value("context_lost", false)) << fault.dump();
  EXPECT_NE(fault["error"].get<std::string>().find("context is lost"), std::string::npos);
  EXPECT_EQ(WaitServer(), 1);  // an error (common/exit_codes.h)
}

TEST_F(ServeGpuTest, ForcedRelocationStillValidates) {
  ASSERT_NO_FATAL_FAILURE(StartServer({"--force-relocate"}));
  auto info = client_->Call({{"op", "info"}});
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE((*info)["relocated"].get<bool>());
  // The argument blob's pointers, the pristine copies and the golden image
  // are all patched the same way.
  EXPECT_TRUE(Evaluate("orig.cubin")["validation"]["passed"].get<bool>());
  EXPECT_FALSE(Evaluate("wrong.cubin")["validation"]["passed"].get<bool>());
  EXPECT_TRUE(Evaluate("fast.cubin")["validation"]["passed"].get<bool>());
  ASSERT_TRUE(client_->Call({{"op", "shutdown"}}).ok());
  EXPECT_EQ(WaitServer(), 0);
}

// --- The comparison kernel agrees with the host comparator ------------------

class DeviceComparatorGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string skip = GpuSkipReason();
    if (!skip.empty()) GTEST_SKIP() << skip;
    cu_ = *CudaDriver::Get();
    ASSERT_EQ(cu_->cuDeviceGet(&dev_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cu_->cuDevicePrimaryCtxRetain(&ctx_, dev_), CUDA_SUCCESS);
    ASSERT_EQ(cu_->cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    ASSERT_EQ(cu_->cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  }
  void TearDown() override {
    if (ctx_ == nullptr) return;
    for (CUdeviceptr p : allocs_) cu_->cuMemFree(p);
    if (stream_) cu_->cuStreamDestroy(stream_);
    cu_->cuDevicePrimaryCtxRelease(dev_);
  }
  CUdeviceptr Upload(const std::string& bytes, size_t misalign) {
    CUdeviceptr p = 0;
    EXPECT_EQ(cu_->cuMemAlloc(&p, bytes.size() + 16), CUDA_SUCCESS);
    allocs_.push_back(p);
    EXPECT_EQ(cu_->cuMemcpyHtoD(p + misalign, bytes.data(), bytes.size()), CUDA_SUCCESS);
    return p + misalign;
  }

  const CudaDriver* cu_ = nullptr;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  std::vector<CUdeviceptr> allocs_;
};

TEST_F(DeviceComparatorGpuTest, AgreesWithHostComparator) {
  struct Case {
    DType dtype;
    Tolerance tol;
    size_t size;
    size_t misalign;
  };
  const std::vector<Case> cases = {
      {DType::kF32, {1e-3, 0, 0, true}, (600u << 10) + 12, 0},
      {DType::kF32, {0, 1e-2, 0, false}, (300u << 10) + 4, 0},
      {DType::kF16, {0, 0, 2, true}, 200002, 0},
      {DType::kBF16, {0, 1e-2, 0, true}, 131072, 0},
      {DType::kF64, {1e-9, 0, 0, true}, 65536 + 8, 0},
      {DType::kBytes, {}, 100001, 3},
      {DType::kI32, {}, 262144 + 6, 4},
      {DType::kI32, {2, 0, 0, true}, 4096, 0},
      {DType::kF32, {}, 1 << 20, 0},  // identical
  };
  std::mt19937_64 rng(42);
  std::vector<uint64_t> sizes;
  std::vector<std::string> expected, actual;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    std::string e(c.size, '\0');
    for (char& ch : e) ch = static_cast<char>(rng());
    // Sane values for float types (random bits are mostly NaN-free anyway).
    if (c.dtype == DType::kF32) {
      for (size_t i = 0; i + 4 <= c.size; i += 4) {
        float f = static_cast<float>(static_cast<int64_t>(rng() % 20001) - 10000) / 7.0f;
        std::memcpy(e.data() + i, &f, 4);
      }
    }
    std::string a = e;
    if (k + 1 != cases.size()) {
      const size_t es = DTypeSize(c.dtype);
      for (int j = 0; j < 300; ++j) {
        const size_t at = (rng() % (c.size / es)) * es;
        switch (j % 6) {
          case 0: a[at] = static_cast<char>(a[at] ^ 1); break;  // low bit: tiny error
          case 1: a[at + es - 1] = static_cast<char>(a[at + es - 1] ^ 0x40); break;  // big
          case 2:
            if (c.dtype == DType::kF32) {
              const float nan = std::numeric_limits<float>::quiet_NaN();
              std::memcpy(a.data() + at, &nan, 4);
              if (j % 12 == 2) std::memcpy(e.data() + at, &nan, 4);
            }
            break;
          case 3:
            if (c.dtype == DType::kF32) {
              const float inf = std::numeric_limits<float>::infinity();
              std::memcpy(a.data() + at, &inf, 4);
            }
            break;
          default: a[at] = static_cast<char>(a[at] + 1); break;
        }
      }
      a[c.size - 1] = static_cast<char>(a[c.size - 1] ^ 0x10);  // trailing bytes too
    }
    sizes.push_back(c.size);
    expected.push_back(e);
    actual.push_back(a);
  }
  auto cmp = DeviceComparator::Create(*cu_, sizes, 64 << 10);  // several tiles per region
  ASSERT_TRUE(cmp.ok()) << cmp.status();
  std::vector<KcCompareRegion> params;
  for (size_t k = 0; k < cases.size(); ++k) {
    params.push_back(MakeCompareRegion(Upload(actual[k], cases[k].misalign),
                                       Upload(expected[k], 0), sizes[k], cases[k].dtype,
                                       cases[k].tol));
  }
  auto raw = (*cmp)->Run(params, stream_);
  ASSERT_TRUE(raw.ok()) << raw.status();
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE(absl::StrCat("case ", k, " dtype ", DTypeName(cases[k].dtype)));
    RegionComparator host(cases[k].dtype, cases[k].tol);
    host.Compare(0, expected[k].data(), actual[k].data(), sizes[k]);
    const CompareStats h = host.stats();
    const CompareStats d = ToCompareStats((*raw)[k]);
    EXPECT_EQ(d.elements_failing, h.elements_failing);
    EXPECT_EQ(d.elements_differing, h.elements_differing);
    EXPECT_EQ(d.bytes_differing, h.bytes_differing);
    EXPECT_EQ(d.nan_mismatches, h.nan_mismatches);
    EXPECT_EQ(d.max_abs_error, h.max_abs_error);
    EXPECT_EQ(d.max_rel_error, h.max_rel_error);
    EXPECT_EQ(d.max_ulp_error, h.max_ulp_error);
    EXPECT_EQ(d.first_fail_offset, h.first_fail_offset);
    EXPECT_EQ(d.first_diff_offset, h.first_diff_offset);
    if (k + 1 == cases.size()) {
      EXPECT_EQ(d.elements_differing, 0u);
    }
  }
}

}  // namespace
}  // namespace kerncap::replay::serve
