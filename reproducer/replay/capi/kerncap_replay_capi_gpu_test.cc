// GPU test of libkerncap_replay.so through its C API, the way a Triton
// reproducer uses it: prepare, translate the captured pointers, launch the
// kernel OURSELVES in the primary context (here: the PTX loaded with the
// driver API, standing in for a JIT-compiled kernel), validate, restore the
// inputs, and again; also the library's own launch, forced relocation and
// tolerances. Skips without libcuda.so.1 or a device.
//
// Like replay_capi_test it links no kerncap protobuf code (the library has
// its own; see there): captures come from replay_capi_fixture, and the
// driver entry points from a small dlopen table of its own.
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "reproducer/replay/capi/kerncap_replay_capi.h"

namespace kerncap::replay {
namespace {

using nlohmann::json;
// capi_test_fixture.h's layout.
constexpr uint64_t kCapiTableVa = 0x7f3b00000000;
constexpr uint64_t kCapiDataVa = 0x7f3b00200000;
constexpr uint32_t kCapiN = 100000;

// The driver functions this test calls, by the symbol cuda.h maps each name
// to (cuMemcpyDtoH -> cuMemcpyDtoH_v2, ...), so the ABI is the declared one.
#define KC_STR_INNER(x) #x
#define KC_STR(x) KC_STR_INNER(x)
#define KC_TEST_DRIVER(X)                                                                     \
  X(cuInit) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain)                    \
  X(cuDevicePrimaryCtxRelease) X(cuCtxGetCurrent) X(cuCtxSynchronize) X(cuModuleLoadData)     \
  X(cuModuleUnload) X(cuModuleGetFunction) X(cuLaunchKernel) X(cuMemcpyDtoH) X(cuGetErrorName)  \
  X(cuCtxSetLimit) X(cuCtxGetLimit)
struct Driver {
#define KC_DECLARE(name) decltype(&::name) name = nullptr;
  KC_TEST_DRIVER(KC_DECLARE)
#undef KC_DECLARE
  std::string error;  // why it could not be loaded

  static const Driver& Get() {
    static const Driver* d = [] {
      auto* d = new Driver();
      void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
      if (h == nullptr) {
        const char* e = ::dlerror();
        d->error = std::string("dlopen(libcuda.so.1): ") + (e ? e : "?");
        return d;
      }
#define KC_RESOLVE(name)                                                              \
  d->name = reinterpret_cast<decltype(d->name)>(::dlsym(h, KC_STR(name)));            \
  if (d->name == nullptr && d->error.empty()) d->error = "libcuda lacks " KC_STR(name);
      KC_TEST_DRIVER(KC_RESOLVE)
#undef KC_RESOLVE
      return d;
    }();
    return *d;
  }
  std::string Name(CUresult r) const {
    const char* n = nullptr;
    if (cuGetErrorName != nullptr) cuGetErrorName(r, &n);
    return n != nullptr ? n : std::to_string(static_cast<int>(r));
  }
};

class CapiGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Driver& d = Driver::Get();
    if (!d.error.empty()) GTEST_SKIP() << "no GPU: " << d.error;
    cu_ = &d;
    CUresult r = cu_->cuInit(0);
    int n = 0;
    if (r != CUDA_SUCCESS || cu_->cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0) {
      GTEST_SKIP() << "no GPU: cuInit: " << cu_->Name(r);
    }
    path_ = (std::filesystem::temp_directory_path() /
             ("kc_replay_capi_gpu_" + std::to_string(::getpid()) + ".kcap"))
                .string();
    ptx_ = path_ + ".ptx";
  }
  void TearDown() override {
    if (module_ != nullptr) cu_->cuModuleUnload(module_);
    if (r_ != nullptr) kerncap_replay_close(r_);
    if (!path_.empty()) std::filesystem::remove(path_);
    if (!ptx_.empty()) std::filesystem::remove(ptx_);
  }

  // The capture, and the kernel's PTX for our own launches.
  void Write(uint64_t golden_delta) {
    // $KERNCAP_REPLAY_TEST_FIXTURE: the fixture writer where the build tree
    // is not (the GPU bundle, deploy/gpu/run_gpu_tests.sh).
    const char* fixture = std::getenv("KERNCAP_REPLAY_TEST_FIXTURE");
    if (fixture == nullptr || *fixture == '\0') fixture = KERNCAP_REPLAY_FIXTURE;
    const std::string cmd = std::string("'") + fixture + "' '" + path_ +
                            "' --golden-delta=" + std::to_string(golden_delta) +
                            " '--write-ptx=" + ptx_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream in(ptx_);
    ptx_text_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    ASSERT_NE(ptx_text_.find(".entry add_one"), std::string::npos);
  }

  void OpenAndPrepare(const char* options = nullptr) {
    char err[1024] = "";
    r_ = kerncap_replay_open(path_.c_str(), options, err, sizeof(err));
    ASSERT_NE(r_, nullptr) << err;
    ASSERT_EQ(kerncap_replay_prepare(r_, err, sizeof(err)), 0) << err;
  }

  json Info() { return json::parse(kerncap_replay_info_json(r_)); }

  json Bench(const json& options) {
    char err[1024] = "";
    char* report = nullptr;
    const std::string text = options.dump();
    const int rc = kerncap_replay_bench(r_, text.c_str(), &report, err, sizeof(err));
    EXPECT_EQ(rc, 0) << err;
    if (rc != 0 || report == nullptr) return json();
    json j = json::parse(report);
    kerncap_replay_free(report);
    return j;
  }

  json Validate(const char* options = nullptr) {
    char err[1024] = "";
    char* report = nullptr;
    const int rc = kerncap_replay_validate(r_, options, &report, err, sizeof(err));
    EXPECT_EQ(rc, 0) << err;
    if (rc != 0 || report == nullptr) return json();
    json j = json::parse(report);
    kerncap_replay_free(report);
    return j;
  }

  // Launches add_one like a JIT runtime would: our own module, in whatever
  // context is current (the library left the primary one current), on the
  // legacy default stream, asynchronously (validate must wait for it).
  void ExternalLaunch() {
    CUcontext current = nullptr, primary = nullptr;
    ASSERT_EQ(cu_->cuCtxGetCurrent(&current), CUDA_SUCCESS);
    CUdevice dev = 0;
    ASSERT_EQ(cu_->cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    ASSERT_EQ(cu_->cuDevicePrimaryCtxRetain(&primary, dev), CUDA_SUCCESS);
    cu_->cuDevicePrimaryCtxRelease(dev);
    ASSERT_EQ(current, primary) << "the library did not leave the primary context current";
    if (module_ == nullptr) {
      ASSERT_EQ(cu_->cuModuleLoadData(&module_, ptx_text_.c_str()), CUDA_SUCCESS);
      ASSERT_EQ(cu_->cuModuleGetFunction(&fn_, module_, "add_one"), CUDA_SUCCESS);
    }
    uint64_t table = kerncap_replay_translate(r_, kCapiTableVa);
    ASSERT_NE(table, 0u);
    unsigned n = kCapiN;
    void* params[] = {&table, &n};
    ASSERT_EQ(cu_->cuLaunchKernel(fn_, (kCapiN + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params,
                                  nullptr),
              CUDA_SUCCESS);
  }

  // Element i of the data region as the device has it now.
  uint64_t DeviceValue(uint32_t i) {
    uint64_t v = 0;
    const uint64_t va = kerncap_replay_translate(r_, kCapiDataVa + 8ull * i);
    EXPECT_NE(va, 0u);
    EXPECT_EQ(cu_->cuCtxSynchronize(), CUDA_SUCCESS);
    EXPECT_EQ(cu_->cuMemcpyDtoH(&v, va, 8), CUDA_SUCCESS);
    return v;
  }

  const Driver* cu_ = nullptr;
  std::string path_, ptx_, ptx_text_;
  kerncap_replay* r_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction fn_ = nullptr;
};

TEST_F(CapiGpuTest, ExternalLaunchValidatesAndRestoreInputsRepeats) {
  Write(1);
  OpenAndPrepare();
  const json info = Info();
  EXPECT_EQ(info["prepared"], true);
  EXPECT_EQ(info["replay_device"], 0);
  ASSERT_EQ(info["regions"].size(), 2u);
  for (const json& r : info["regions"]) {
    EXPECT_EQ(r["restored"], true) << r;
    EXPECT_NE(r["replay_va"], 0) << r;
  }
  ASSERT_TRUE(info.contains("replay"));
  if (info["relocated"] == true) {
    std::fprintf(stderr, "note: the driver did not honour the address hint here\n");
  } else {
    EXPECT_EQ(kerncap_replay_translate(r_, kCapiDataVa + 24), kCapiDataVa + 24);
    EXPECT_EQ(info["regions"][1]["replay_va"].get<uint64_t>(), kCapiDataVa);
  }
  EXPECT_EQ(kerncap_replay_translate(r_, kCapiDataVa + 8ull * kCapiN), 0u);  // one past the end
  EXPECT_EQ(DeviceValue(5), 15u);  // the pre image

  ExternalLaunch();
  json v = Validate();
  EXPECT_EQ(v["pass"], true) << v.dump(2);
  EXPECT_EQ(v["regions_compared"], 2);
  EXPECT_TRUE(v["differing"].empty());
  EXPECT_EQ(DeviceValue(5), 16u);

  // A second launch without restoring: every value is one too high.
  ExternalLaunch();
  v = Validate(R"({"dtype":"u64"})");
  EXPECT_EQ(v["pass"], false);
  ASSERT_EQ(v["differing"].size(), 1u) << v.dump(2);
  EXPECT_EQ(v["differing"][0]["index"], 1);
  EXPECT_EQ(v["differing"][0]["count"], kCapiN);
  EXPECT_EQ(v["differing"][0]["worst_abs"], 1.0);
  // ... within an absolute tolerance of 1 for that region only.
  v = Validate(R"({"regions":{"1":{"dtype":"u64","atol":1}}})");
  EXPECT_EQ(v["pass"], true) << v.dump(2);
  EXPECT_TRUE(v["differing"].empty());
  ASSERT_EQ(v["within_tolerance"].size(), 1u);
  EXPECT_EQ(v["within_tolerance"][0]["elements_differing"], kCapiN);

  char err[1024] = "";
  ASSERT_EQ(kerncap_replay_restore_inputs(r_, err, sizeof(err)), 0) << err;
  EXPECT_EQ(DeviceValue(5), 15u);
  ExternalLaunch();
  EXPECT_EQ(Validate()["pass"], true);

  // The library's own launch of the captured kernel, timed.
  ASSERT_EQ(kerncap_replay_restore_inputs(r_, err, sizeof(err)), 0) << err;
  double ms = -1;
  ASSERT_EQ(kerncap_replay_launch(r_, &ms, err, sizeof(err)), 0) << err;
  EXPECT_GT(ms, 0);
  EXPECT_EQ(Validate()["pass"], true);
  for (int i = 0; i < 3; ++i) {  // a timing loop
    ASSERT_EQ(kerncap_replay_restore_inputs(r_, err, sizeof(err)), 0) << err;
    ASSERT_EQ(kerncap_replay_launch(r_, &ms, err, sizeof(err)), 0) << err;
  }
  EXPECT_EQ(Validate()["pass"], true);

  // A second prepare is a no-op that keeps the state.
  ASSERT_EQ(kerncap_replay_prepare(r_, err, sizeof(err)), 0) << err;
  EXPECT_EQ(DeviceValue(5), 16u);
}

TEST_F(CapiGpuTest, ForcedRelocationTranslatesAndPatches) {
  Write(1);
  OpenAndPrepare(R"({"force_relocation":true})");
  const json info = Info();
  EXPECT_EQ(info["relocated"], true);
  const uint64_t data = kerncap_replay_translate(r_, kCapiDataVa);
  ASSERT_NE(data, 0u);
  EXPECT_NE(data, kCapiDataVa);
  EXPECT_EQ(kerncap_replay_translate(r_, kCapiDataVa + 40), data + 40);
  EXPECT_EQ(info["regions"][1]["replay_va"].get<uint64_t>(), data);
  // The pointer stored in the table was patched: our own launch, given only
  // the translated table, finds the data.
  ExternalLaunch();
  json v = Validate();
  EXPECT_EQ(v["pass"], true) << v.dump(2);
  char err[1024] = "";
  ASSERT_EQ(kerncap_replay_restore_inputs(r_, err, sizeof(err)), 0) << err;
  double ms = 0;
  ASSERT_EQ(kerncap_replay_launch(r_, &ms, err, sizeof(err)), 0) << err;
  EXPECT_EQ(Validate()["pass"], true);
}

TEST_F(CapiGpuTest, WrongGoldenImageFails) {
  Write(2);
  OpenAndPrepare();
  double ms = 0;
  char err[1024] = "";
  ASSERT_EQ(kerncap_replay_launch(r_, &ms, err, sizeof(err)), 0) << err;
  json v = Validate(R"({"dtype":"u64"})");
  EXPECT_EQ(v["pass"], false);
  EXPECT_EQ(v["result"], "fail");
  ASSERT_EQ(v["differing"].size(), 1u);
  EXPECT_EQ(v["differing"][0]["count"], kCapiN);
}

TEST_F(CapiGpuTest, MissingCodeObjectKernelFailsPrepareAndCanRetry) {
  Write(1);
  const std::string ptx = path_ + ".other.ptx";
  std::string renamed = ptx_text_;
  renamed.replace(renamed.find(".entry add_one"), 14, ".entry add_two");
  FILE* f = std::fopen(ptx.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(renamed.c_str(), f);
  std::fclose(f);
  const std::string options = R"({"code_object":")" + ptx + R"("})";
  char err[1024] = "";
  r_ = kerncap_replay_open(path_.c_str(), options.c_str(), err, sizeof(err));
  ASSERT_NE(r_, nullptr) << err;
  EXPECT_EQ(kerncap_replay_prepare(r_, err, sizeof(err)), KERNCAP_REPLAY_E_REPLAY);
  EXPECT_NE(std::string(err).find("has no kernel named add_one"), std::string::npos) << err;
  EXPECT_EQ(Info()["prepared"], false);
  kerncap_replay_close(r_);
  r_ = nullptr;
  std::filesystem::remove(ptx);
  // Everything the failed prepare took was released: a new one works (and
  // gets the original addresses where the driver honours the hints).
  OpenAndPrepare();
  if (Info()["relocated"] == true) {
    std::fprintf(stderr, "note: relocated after a failed prepare (or hints not honoured)\n");
  }
  double ms = 0;
  ASSERT_EQ(kerncap_replay_launch(r_, &ms, err, sizeof(err)), 0) << err;
  EXPECT_EQ(Validate()["pass"], true);
}

// kerncap_replay_bench: the captured binary alone, then the same binary as a
// variant file (what run.py --bench of identical SASS does): both measured
// through one launch path, so the speedup is ~1.0.
TEST_F(CapiGpuTest, BenchOfTheSameBinaryAsAVariantIsEven) {
  Write(1);
  OpenAndPrepare();
  const json alone = Bench(json{{"iterations", 20}, {"warmup", 3}});
  ASSERT_FALSE(alone.is_null());
  std::fprintf(stderr, "%s\n", alone.dump(1).c_str());
  EXPECT_TRUE(alone["variant"].is_null());
  EXPECT_GT(alone["original"]["median_ms"].get<double>(), 0.0);
  EXPECT_EQ(alone["revalidated"]["original"], "pass");
  const json j = Bench(json{{"iterations", 50}, {"warmup", 5}, {"variant", ptx_}, {"cold_l2", true}});
  ASSERT_FALSE(j.is_null());
  std::fprintf(stderr, "%s\n", j.dump(1).c_str());
  EXPECT_GT(j["speedup"].get<double>(), 0.7);
  EXPECT_LT(j["speedup"].get<double>(), 1.4);
  EXPECT_GT(j["spread"]["median"].get<double>(), 0.7);
  EXPECT_LT(j["spread"]["median"].get<double>(), 1.4);
  EXPECT_EQ(j["validated"]["variant"], "pass");
  EXPECT_EQ(j["revalidated"]["variant"], "pass");
  EXPECT_EQ(j["revalidated"]["original"], "pass");
  EXPECT_EQ(j["pass"], true);
  // The memory holds one launch's result afterwards.
  EXPECT_EQ(Validate()["pass"], true);
}

TEST_F(CapiGpuTest, BenchResetsAPersistingL2LimitLeftByAPreviousRun) {
  Write(1);
  OpenAndPrepare();
  const CUresult set = cu_->cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 4 << 20);
  if (set != CUDA_SUCCESS) GTEST_SKIP() << "no persisting L2 here: " << cu_->Name(set);
  size_t before = 0;
  ASSERT_EQ(cu_->cuCtxGetLimit(&before, CU_LIMIT_PERSISTING_L2_CACHE_SIZE), CUDA_SUCCESS);
  ASSERT_GT(before, 0u);
  const json j = Bench(json{{"iterations", 5}, {"warmup", 1}});
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["persisting_l2"]["limit_before_bytes"].get<uint64_t>(), before);
  EXPECT_EQ(j["persisting_l2"]["limit_during_bytes"], 0);
  EXPECT_EQ(j["persisting_l2"]["lines_reset"], true);
  size_t after = 0;
  ASSERT_EQ(cu_->cuCtxGetLimit(&after, CU_LIMIT_PERSISTING_L2_CACHE_SIZE), CUDA_SUCCESS);
  EXPECT_EQ(after, before);  // the caller's setting, back
}

}  // namespace
}  // namespace kerncap::replay
