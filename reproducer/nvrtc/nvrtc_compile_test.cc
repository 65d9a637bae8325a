// kerncap-nvrtc against nvcc on a fixture of our own (half precision from
// cuda_fp16.h, a template kernel instantiated explicitly, a device function
// template, a constexpr helper, a __constant__ array, a quoted include): the
// same flags through both must build identical kernels (KernelFingerprint:
// code, registers, shared/constant sizes, relocations). Also the binary's
// refusals and its fallback errors. The compile cases skip without nvcc or
// libnvrtc, saying which.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/exit_codes.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "reproducer/generator/kernel_code.h"
#include "reproducer/generator/tool_runner.h"
#include "reproducer/nvrtc/nvrtc_library.h"

namespace kerncap::repro::nvrtc {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kHeader[] = R"(#pragma once
#define KC_GAIN 3
template <int N>
__device__ __forceinline__ float poly(float v) { return v * v * N + KC_GAIN; }
)";

constexpr char kUnit[] = R"(#include <cuda_fp16.h>
#include "fixture.cuh"
__constant__ float c_scale[4];
constexpr int kUnroll = 4;
template <typename T, int N>
__global__ void axpy_half(const __half* __restrict__ x, T* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
  for (int k = 0; k < kUnroll; ++k, i += gridDim.x * blockDim.x) {
    if (i >= n) return;
    __half h = __hmul(x[i], __float2half(a * c_scale[k]));
    y[i] = static_cast<T>(__half2float(h)) + poly<N>(static_cast<float>(y[i]));
  }
}
template __global__ void axpy_half<float, 4>(const __half*, float*, float, int);
template __global__ void axpy_half<double, 2>(const __half*, double*, float, int);
)";

// The standard headers kerncap-nvrtc provides (std_headers.h), as a
// minimal unit includes them: types in the kernel's signature (mangled
// names), macros in its code. (No printf beside the assert: with both,
// NVRTC lays their strings out in another order than nvcc, so the code
// differs and the generator's comparison keeps nvcc; seen with CUDA 13.0.)
constexpr char kStdUnit[] = R"(#include <cstdint>
#include <stdint.h>
#include <climits>
#include <cfloat>
#include <cstddef>
#include <cstdio>
#include <cassert>
struct Item { int32_t a; uint64_t b; };
__global__ void limits_kernel(std::int64_t* out, const uint32_t* in, int64_t n, std::size_t k,
                              uint8_t flags, float* f, double* d) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint32_t v = in[i] == UINT32_MAX ? 0u : in[i];
  out[i] = v + INT_MAX + (flags & UINT8_C(3)) + INT64_C(1) + CHAR_BIT + sizeof(Item) + k +
           (i < SIZE_MAX ? 1 : 0) + INT32_MIN + SHRT_MAX + LLONG_MIN / 2;
  f[i] = f[i] > FLT_MAX / 2 ? FLT_EPSILON : FLT_MIN;
  d[i] = d[i] > DBL_MAX / 2 ? DBL_EPSILON : DBL_MIN;
  assert(out[i] != 0);
}
)";
constexpr char kStdKernel[] = "_Z13limits_kernelPlPKjlmhPfPd";

const char* const kKernels[] = {"_Z9axpy_halfIfLi4EEvPK6__halfPT_fi",
                                "_Z9axpy_halfIdLi2EEvPK6__halfPT_fi"};

std::string Tool() {
  const char* b = std::getenv("KERNCAP_BUILD_DIR");
  return std::string(b == nullptr ? "." : b) + "/bin/kerncap-nvrtc";
}

class NvrtcCompileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string t = (fs::temp_directory_path() / "kerncap-nvrtc-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(t.data()), nullptr);
    dir_ = t;
    std::ofstream(dir_ + "/fixture.cuh") << kHeader;
    std::ofstream(dir_ + "/kernel.cu") << kUnit;
    ASSERT_EQ(::access(Tool().c_str(), X_OK), 0) << Tool() << " not built";
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  // Skips (saying why) without nvcc or a libnvrtc beside it.
  void NeedToolkit() {
    nvcc_ = ResolveTools({}).nvcc;
    if (nvcc_.empty()) GTEST_SKIP() << "no nvcc";
    if (!LoadNvrtc(NvrtcCandidates("", nullptr, nvcc_)).ok()) {
      GTEST_SKIP() << "no libnvrtc beside " << nvcc_;
    }
  }
  absl::StatusOr<ToolResult> Run(std::vector<std::string> argv) { return RunTool(argv, dir_, 300); }
  std::string Bytes(const std::string& rel) {
    auto b = ReadFile(dir_ + "/" + rel);
    return b.ok() ? *b : "";
  }
  // Both compilers with `flags`; every fixture kernel must be identical.
  void ExpectSameKernels(const std::vector<std::string>& flags,
                         const std::string& unit = "kernel.cu",
                         std::vector<std::string> kernels = {kKernels[0], kKernels[1]}) {
    std::vector<std::string> nv = {nvcc_, "-cubin", "-arch=sm_90"};
    nv.insert(nv.end(), flags.begin(), flags.end());
    nv.insert(nv.end(), {"-o", "nvcc.cubin", unit});
    auto r = Run(nv);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->exit_code, 0) << r->err;
    std::vector<std::string> rt = {Tool(), "--nvcc=" + nvcc_, "-arch=sm_90"};
    rt.insert(rt.end(), flags.begin(), flags.end());
    rt.insert(rt.end(), {"-o", "build/nvrtc.cubin", unit});
    fs::create_directories(dir_ + "/build");
    r = Run(rt);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->exit_code, 0) << r->err;
    const std::string a = Bytes("nvcc.cubin"), b = Bytes("build/nvrtc.cubin");
    for (const std::string& k : kernels) {
      auto fa = KernelFingerprint(a, k);
      auto fb = KernelFingerprint(b, k);
      ASSERT_TRUE(fa.ok()) << k << ": " << fa.status();
      ASSERT_TRUE(fb.ok()) << k << ": " << fb.status();
      EXPECT_TRUE(*fa == *fb) << k << ": " << DescribeDifference(*fa, *fb);
    }
  }
  std::string dir_, nvcc_;
};

TEST_F(NvrtcCompileTest, BuildsTheKernelsNvccBuilds) {
  NeedToolkit();
  ExpectSameKernels({"-O3", "-std=c++17", "-Xcompiler", "-fPIC", "--expt-relaxed-constexpr"});
}

TEST_F(NvrtcCompileTest, CodeGenerationFlagsReachNvrtc) {
  NeedToolkit();
  ExpectSameKernels({"-O3", "-lineinfo", "--use_fast_math", "-maxrregcount=32", "-Xptxas",
                     "-O3,-dlcm=ca", "-DKC_UNUSED=1"});
  // And they matter: without --use_fast_math NVRTC builds other code than
  // nvcc with it (the comparison above can fail).
  auto r =
      Run({nvcc_, "-cubin", "-arch=sm_90", "--use_fast_math", "-o", "fast.cubin", "kernel.cu"});
  ASSERT_TRUE(r.ok() && r->exit_code == 0);
  r = Run({Tool(), "--nvcc=" + nvcc_, "-arch=sm_90", "-o", "slow.cubin", "kernel.cu"});
  ASSERT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->err : "");
  auto fast = KernelFingerprint(Bytes("fast.cubin"), kKernels[0]);
  auto slow = KernelFingerprint(Bytes("slow.cubin"), kKernels[0]);
  ASSERT_TRUE(fast.ok() && slow.ok());
  EXPECT_FALSE(*fast == *slow);
}

TEST_F(NvrtcCompileTest, StandardHeadersNvrtcLacksAreProvided) {
  NeedToolkit();
  std::ofstream(dir_ + "/std.cu") << kStdUnit;
  ExpectSameKernels({"-O3"}, "std.cu", {kStdKernel});
  ExpectSameKernels({"-O3", "-DNDEBUG"}, "std.cu", {kStdKernel});
}

TEST_F(NvrtcCompileTest, RejectedSourceKeepsTheOldCubinAndPrintsTheLog) {
  NeedToolkit();
  std::ofstream(dir_ + "/bad.cu") << "__global__ void k(int* x) { x[0] = undeclared; }\n";
  std::ofstream(dir_ + "/old.cubin") << "previous";
  auto r = Run({Tool(), "--nvcc=" + nvcc_, "-arch=sm_90", "-o", "old.cubin", "bad.cu"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, exit_code::kError);
  EXPECT_THAT(r->err, HasSubstr("identifier \"undeclared\" is undefined"));
  EXPECT_THAT(r->err, HasSubstr("kerncap-nvrtc: NVRTC ("));
  EXPECT_EQ(Bytes("old.cubin"), "previous");
}

TEST_F(NvrtcCompileTest, RefusedFlagIsNamedWithItsExitCode) {
  // Refused before any library is looked for: no toolkit needed.
  auto r =
      Run({Tool(), "-arch=sm_90", "-Xcudafe", "--diag_suppress=1", "-o", "k.cubin", "kernel.cu"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, exit_code::kRefused);
  EXPECT_THAT(r->err, HasSubstr("refused flag -Xcudafe: not known"));
  r = Run({Tool(), "-arch=sm_90", "-rdc=true", "-o", "k.cubin", "kernel.cu"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, exit_code::kRefused);
  EXPECT_FALSE(fs::exists(dir_ + "/k.cubin"));
}

TEST_F(NvrtcCompileTest, MissingLibraryIsNotFound) {
  auto r = Run(
      {Tool(), "--nvrtc=/nonexistent/libnvrtc.so", "-arch=sm_90", "-o", "k.cubin", "kernel.cu"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, exit_code::kNotFound);
  EXPECT_THAT(r->err, HasSubstr("/nonexistent/libnvrtc.so"));
  r = Run({Tool(), "--nvcc=/nonexistent/bin/nvcc", "-arch=sm_90", "-o", "k.cubin", "kernel.cu"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, exit_code::kNotFound);
  EXPECT_THAT(r->err, HasSubstr("no libnvrtc"));
}

TEST(NvrtcLibrary, CandidatesBesideNvcc) {
  EXPECT_THAT(NvrtcCandidates("/x/libnvrtc.so.12", "/env/libnvrtc.so", "nvcc"),
              ::testing::ElementsAre("/x/libnvrtc.so.12"));
  EXPECT_THAT(NvrtcCandidates("", "/env/libnvrtc.so", "nvcc"),
              ::testing::ElementsAre("/env/libnvrtc.so"));
  // A toolkit laid out as CUDA's: bin/nvcc, lib64/ with versioned names only,
  // targets/<triple>/lib.
  std::string t = (fs::temp_directory_path() / "kerncap-nvrtc-tk-XXXXXX").string();
  ASSERT_NE(::mkdtemp(t.data()), nullptr);
  fs::create_directories(t + "/bin");
  fs::create_directories(t + "/lib64");
  fs::create_directories(t + "/targets/x86_64-linux/lib");
  std::ofstream(t + "/bin/nvcc") << "#!/bin/sh\n";
  fs::permissions(t + "/bin/nvcc", fs::perms::owner_all);
  for (const char* f :
       {"lib64/libnvrtc.so.12", "lib64/libnvrtc.so.13", "lib64/libnvrtc.alt.so.13",
        "lib64/libnvrtc-builtins.so.13.0", "targets/x86_64-linux/lib/libnvrtc.so"}) {
    std::ofstream(t + "/" + f) << "";
  }
  EXPECT_THAT(NvrtcCandidates("", nullptr, t + "/bin/nvcc"),
              ::testing::ElementsAre(t + "/lib64/libnvrtc.so.13",
                                     t + "/targets/x86_64-linux/lib/libnvrtc.so"));
  EXPECT_TRUE(NvrtcCandidates("", nullptr, t + "/bin/no-nvcc").empty());
  fs::remove_all(t);
}

}  // namespace
}  // namespace kerncap::repro::nvrtc
