// The minimal unit (minimal_unit.h) on fixtures of our own, compiled here with
// nvcc for sm_90 and sliced by kerncap-cuda-slice: a template kernel whose
// helpers live in a header (a class template, a function template, an enum
// class, macros, a namespace), a static __device__ variable, a __constant__
// array, an anonymous-namespace helper; unrelated kernels, helpers and system
// headers that must not be copied; a kernel instantiated with a lambda (no
// explicit instantiation can name it); a kernel that embeds __LINE__ (its
// minimal unit builds other code, so the project must fall back); a parse
// that fails. The NVRTC path (kerncap-nvrtc, the minimal unit's fast
// recompile): a unit NVRTC builds identically (half precision, templates),
// one with <cstdint> (kerncap-nvrtc provides it), one NVRTC rejects
// (<type_traits>: NVRTC has no C++ library), a flag it
// refuses, no kerncap-nvrtc. The compile-and-compare cases skip without nvcc
// or the slicer.
#include "reproducer/generator/minimal_unit.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "reproducer/generator/build_file.h"
#include "reproducer/generator/tool_runner.h"

namespace kerncap::repro {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kHeader[] = R"(#pragma once
#include <cstdint>
#define KC_SCALE 3
#define KC_TWICE(x) ((x) * 2)
#define KC_UNUSED_MACRO 99
namespace kc {
template <typename T>
struct Pair {
  T a, b;
  __device__ T sum() const { return a + b; }
};
template <typename T>
__device__ __forceinline__ T scaled(T v) { return v * KC_SCALE; }
__device__ inline float unused_helper(float x) { return x * 42.f; }
enum class Mode { kAdd, kMul };
}  // namespace kc
)";

constexpr char kUnit[] = R"(#include "helpers.cuh"
#include <cstdio>
static __device__ int g_counter;
__constant__ float c_bias[4];
namespace {
__device__ float local_helper(float x) { return KC_TWICE(x) + c_bias[0]; }
}  // namespace
__device__ uint32_t clamp_index(uint32_t i) { return i == UINT32_MAX ? 0u : i; }
template <int N, kc::Mode M>
__global__ void fused(const float* in, float* out, int n) {
  int i = clamp_index(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  kc::Pair<float> p{in[i], static_cast<float>(N)};
  float v = M == kc::Mode::kAdd ? p.sum() : kc::scaled(p.a);
  for (int k = 0; k < 4; ++k) v += c_bias[k];
  out[i] = local_helper(v);
  atomicAdd(&g_counter, 1);
}
__global__ void other_kernel(float* x) {
  x[0] = kc::unused_helper(1.f) + KC_UNUSED_MACRO;
  printf("other\n");
}
__global__ void line_kernel(int* out) { out[threadIdx.x] = __LINE__ * 7 + threadIdx.x; }
void launch(const float* in, float* out, int n, int* lines, cudaStream_t s) {
  fused<128, kc::Mode::kAdd><<<1, 128, 0, s>>>(in, out, n);
  fused<64, kc::Mode::kMul><<<1, 64, 0, s>>>(in, out, n);
  other_kernel<<<1, 1, 0, s>>>(out);
  line_kernel<<<1, 32, 0, s>>>(lines);
}
)";

constexpr char kFused128[] = "_Z5fusedILi128ELN2kc4ModeE0EEvPKfPfi";
constexpr char kLineKernel[] = "_Z11line_kernelPi";

// kerncap's own tool `name` in the build's bin/; empty when not built.
std::string BuiltTool(const std::string& name) {
  const char* b = std::getenv("KERNCAP_BUILD_DIR");
  const std::string p = std::string(b == nullptr ? "." : b) + "/bin/" + name;
  return ::access(p.c_str(), X_OK) == 0 ? p : "";
}

std::string Slicer() { return BuiltTool("kerncap-cuda-slice"); }

class MinimalUnitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nvcc_ = ResolveTools({}).nvcc;
    slicer_ = Slicer();
    if (nvcc_.empty()) GTEST_SKIP() << "no nvcc";
    if (slicer_.empty()) GTEST_SKIP() << "kerncap-cuda-slice not built (libclang-15-dev missing)";
    std::string t = (fs::temp_directory_path() / "kerncap-mu-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(t.data()), nullptr);
    dir_ = t;
    fs::create_directories(dir_ + "/src/include");
    std::ofstream(dir_ + "/src/include/helpers.cuh") << kHeader;
    std::ofstream(dir_ + "/src/app.cu") << kUnit;
    // The "captured" code: the whole unit as the application built it.
    auto r = RunTool({nvcc_, "-cubin", "-arch=sm_90", "-O3", "-std=c++17", "-Isrc/include", "-o",
                      "app.cubin", "src/app.cu"},
                     dir_, 300);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->exit_code, 0) << r->err;
    auto bytes = ReadFile(dir_ + "/app.cubin");
    ASSERT_TRUE(bytes.ok());
    captured_ = *bytes;
    fs::remove(dir_ + "/app.cubin");
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  MinimalUnitQuery Query(const std::string& symbol) {
    MinimalUnitQuery q;
    q.project_dir = dir_;
    q.unit = "src/app.cu";
    q.source_root = "src";
    q.flags = {"-O3", "-std=c++17", "-Isrc/include"};
    q.arch = "sm_90";
    q.kernel_symbol = symbol;
    q.captured_code = captured_;
    q.nvcc = nvcc_;
    q.slicer = slicer_;
    return q;
  }
  // The captured code of `unit` (under src/) compiled with `flags`.
  std::string Capture(const std::string& unit, const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {nvcc_, "-cubin", "-arch=sm_90"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"-o", "cap.cubin", unit});
    auto r = RunTool(argv, dir_, 300);
    EXPECT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->err : "");
    auto bytes = ReadFile(dir_ + "/cap.cubin");
    fs::remove(dir_ + "/cap.cubin");
    return bytes.ok() ? *bytes : "";
  }
  std::string nvcc_, slicer_, dir_, captured_;
};

TEST_F(MinimalUnitTest, TemplateKernelWithHeaderHelpersIsVerified) {
  MinimalUnit mu = BuildMinimalUnit(Query(kFused128));
  ASSERT_EQ(mu.outcome, "verified") << mu.reason;
  EXPECT_EQ(mu.verified_against, "captured");
  EXPECT_TRUE(mu.reason.empty());
  // What the kernel needs, as written.
  EXPECT_THAT(mu.text, HasSubstr("#define KC_SCALE 3"));
  EXPECT_THAT(mu.text, HasSubstr("#define KC_TWICE(x) ((x) * 2)"));
  EXPECT_THAT(mu.text, HasSubstr("struct Pair {"));
  EXPECT_THAT(mu.text, HasSubstr("__device__ __forceinline__ T scaled(T v)"));
  EXPECT_THAT(mu.text, HasSubstr("enum class Mode { kAdd, kMul };"));
  EXPECT_THAT(mu.text, HasSubstr("namespace kc {"));
  EXPECT_THAT(mu.text, HasSubstr("static __device__ int g_counter;"));
  EXPECT_THAT(mu.text, HasSubstr("__constant__ float c_bias[4];"));
  EXPECT_THAT(mu.text, HasSubstr("namespace {\n__device__ float local_helper"));
  // A toolkit/system declaration and macro (uint32_t, UINT32_MAX): the
  // project's #include that provides them, not their text.
  EXPECT_THAT(mu.text, HasSubstr("__device__ uint32_t clamp_index(uint32_t i)"));
  EXPECT_THAT(mu.text, HasSubstr("\n#include <cstdint>\n"));
  // The captured specialization, instantiated explicitly.
  EXPECT_THAT(mu.text, HasSubstr("template __global__ void fused<128, kc::Mode::kAdd>("
                                 "const float *, float *, int);"));
  // Nothing else.
  EXPECT_THAT(mu.text, Not(HasSubstr("other_kernel")));
  EXPECT_THAT(mu.text, Not(HasSubstr("unused_helper")));
  EXPECT_THAT(mu.text, Not(HasSubstr("KC_UNUSED_MACRO")));
  EXPECT_THAT(mu.text, Not(HasSubstr("line_kernel")));
  EXPECT_THAT(mu.text, Not(HasSubstr("cstdio")));
  EXPECT_THAT(mu.text, Not(HasSubstr("void launch")));
  // Declarations in their original order: the header's before the unit's.
  EXPECT_LT(mu.text.find("struct Pair"), mu.text.find("g_counter"));
  EXPECT_LT(mu.text.find("local_helper"), mu.text.find("__global__ void fused"));
  ASSERT_TRUE(mu.slice.is_object());
  EXPECT_EQ(mu.slice.value("kernel", ""), "fused<128, kc::Mode::kAdd>");
  EXPECT_TRUE(mu.slice.value("template", false));
  EXPECT_EQ(mu.slice.value("parse_errors", -1), 0);
  EXPECT_GT(mu.compile_seconds, 0);
  // The verification compile is not left behind: the generator writes the file.
  EXPECT_FALSE(fs::exists(dir_ + "/" + kMinimalUnitFile));
}

TEST_F(MinimalUnitTest, KernelEmbeddingItsLineNumberFallsBack) {
  // __LINE__ is another number in the minimal unit: other code, so it must
  // not become the edit target.
  MinimalUnit mu = BuildMinimalUnit(Query(kLineKernel));
  EXPECT_EQ(mu.outcome, "differs");
  EXPECT_THAT(mu.reason, HasSubstr("differently from the captured code (the code ("));
  EXPECT_THAT(mu.reason, HasSubstr("and from the whole unit compiled here (the code"));
  EXPECT_TRUE(mu.text.empty());
  EXPECT_FALSE(fs::exists(dir_ + "/" + kMinimalUnitFile));
}

TEST_F(MinimalUnitTest, UnparsableUnitFallsBackWithTheReason) {
  MinimalUnitQuery q = Query(kFused128);
  q.flags = {"-O3", "-std=c++17"};  // helpers.cuh cannot be found
  MinimalUnit mu = BuildMinimalUnit(q);
  EXPECT_EQ(mu.outcome, "slice_failed");
  EXPECT_THAT(mu.reason, HasSubstr("kerncap-cuda-slice failed"));
  EXPECT_THAT(mu.reason, HasSubstr("helpers.cuh"));
}

TEST_F(MinimalUnitTest, KernelMissingFromTheCaptureIsRefused) {
  MinimalUnit mu = BuildMinimalUnit(Query("_Z9no_kernelv"));
  EXPECT_EQ(mu.outcome, "unavailable");
  EXPECT_THAT(mu.reason, HasSubstr("the captured code cannot be compared"));
}

TEST_F(MinimalUnitTest, LambdaInstantiatedKernelKeepsItsCallSite) {
  // The closure type cannot be named in an explicit instantiation: the host
  // function holding the lambda is copied and its launch instantiates the
  // kernel, under the captured name.
  std::ofstream(dir_ + "/src/lam.cu") << R"(template <typename F>
__global__ void apply(F f, float* x) { x[threadIdx.x] = f(threadIdx.x); }
__device__ float far_away(float v) { return v * 9.f; }
void launch_lambda(float* x, float s) {
  auto f = [s] __device__(int i) { return i * s; };
  apply<<<1, 32>>>(f, x);
}
)";
  const std::vector<std::string> flags = {"-O3", "-std=c++17", "--extended-lambda"};
  std::vector<std::string> argv = {nvcc_, "-cubin", "-arch=sm_90"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-o", "lam.cubin", "src/lam.cu"});
  auto r = RunTool(argv, dir_, 300);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->exit_code, 0) << r->err;
  auto bytes = ReadFile(dir_ + "/lam.cubin");
  ASSERT_TRUE(bytes.ok());
  MinimalUnitQuery q = Query("_Z5applyIZ13launch_lambdaPffEUliE_EvT_S0_");
  q.unit = "src/lam.cu";
  q.flags = flags;
  q.captured_code = *bytes;
  MinimalUnit mu = BuildMinimalUnit(q);
  ASSERT_EQ(mu.outcome, "verified") << mu.reason;
  EXPECT_THAT(mu.text, HasSubstr("void launch_lambda(float* x, float s) {"));
  EXPECT_THAT(mu.text, HasSubstr("cannot be named"));
  EXPECT_THAT(mu.text, Not(HasSubstr("template __global__")));
  EXPECT_THAT(mu.text, Not(HasSubstr("far_away")));
}

// What llama.cpp's mmq kernels need and the first slicer lost: a helper
// declared with a leading C++11 attribute ([[noreturn]]: its text starts
// before the attribute's name) and one with a GNU attribute; tile templates
// of a project namespace found through `using namespace` (no trace in the
// AST); a warp reduction nvcc declares and clang 15 does not
// (__reduce_add_sync, sm_80: it must parse without an error).
TEST_F(MinimalUnitTest, AttributesUsingDirectivesAndNewerIntrinsicsAreKept) {
  std::ofstream(dir_ + "/src/include/tiles.cuh") << R"(#pragma once
namespace kc_mma {
template <int I, typename T> struct tile { T x[I]; static constexpr int n = I; };
}  // namespace kc_mma
namespace kc_unused { struct never {}; }
)";
  std::ofstream(dir_ + "/src/red.cu") << R"(#include "tiles.cuh"
#include <cstdio>
using namespace kc_mma;
using namespace kc_unused;
[[noreturn]] static __device__ void stop_here(int line) { printf("bad %d\n", line); __trap(); }
__attribute__((noinline)) __device__ int twice(int v) { return 2 * v; }
static __device__ __forceinline__ int warp_sum(int v) {
#if __CUDA_ARCH__ >= 800
  return __reduce_add_sync(0xffffffff, v);
#else
  return v;
#endif
}
template <int I>
__global__ void red(const int* in, int* out) {
  tile<I, int> t;
  for (int k = 0; k < tile<I, int>::n; ++k) t.x[k] = in[threadIdx.x * I + k];
  int s = 0;
  for (int k = 0; k < I; ++k) s += t.x[k];
  if (s < 0) stop_here(s);
  out[threadIdx.x] = twice(warp_sum(s));
}
template __global__ void red<4>(const int*, int*);
)";
  const std::vector<std::string> flags = {"-O3", "-std=c++17", "-Isrc/include"};
  MinimalUnitQuery q = Query("_Z3redILi4EEvPKiPi");
  q.unit = "src/red.cu";
  q.flags = flags;
  q.captured_code = Capture("src/red.cu", flags);
  ASSERT_FALSE(q.captured_code.empty());
  MinimalUnit mu = BuildMinimalUnit(q);
  ASSERT_EQ(mu.outcome, "verified") << mu.reason << "\n" << mu.text;
  EXPECT_THAT(mu.text, HasSubstr("[[noreturn]] static __device__ void stop_here(int line)"));
  EXPECT_THAT(mu.text, HasSubstr("__attribute__((noinline)) __device__ int twice(int v)"));
  EXPECT_THAT(mu.text, HasSubstr("using namespace kc_mma;"));
  EXPECT_THAT(mu.text, Not(HasSubstr("kc_unused")));
  EXPECT_THAT(mu.text, HasSubstr("__reduce_add_sync(0xffffffff, v)"));
  // The parse-only declarations of the toolkit's functions are not copied.
  EXPECT_THAT(mu.text, Not(HasSubstr("kerncap_cuda_compat")));
  ASSERT_TRUE(mu.slice.is_object());
  EXPECT_EQ(mu.slice.value("parse_errors", -1), 0) << mu.slice.dump();
}

// A unit NVRTC can build: toolkit headers only, no host code.
constexpr char kHalfUnit[] = R"(#include <cuda_fp16.h>
#include "helpers.cuh"
template <typename T, int N>
__global__ void hscale(const __half* x, T* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = static_cast<T>(__half2float(__hmul(x[i], __float2half(a)))) + kc::scaled(N);
}
__global__ void unrelated(float* x) { x[0] = kc::unused_helper(2.f); }
template __global__ void hscale<float, 3>(const __half*, float*, float, int);
)";
constexpr char kHscale[] = "_Z6hscaleIfLi3EEvPK6__halfPT_fi";

class MinimalUnitNvrtcTest : public MinimalUnitTest {
 protected:
  void SetUp() override {
    MinimalUnitTest::SetUp();
    if (IsSkipped()) return;
    nvrtc_ = BuiltTool("kerncap-nvrtc");
    ASSERT_FALSE(nvrtc_.empty()) << "kerncap-nvrtc not built";
    std::ofstream(dir_ + "/src/half.cu") << kHalfUnit;
  }
  MinimalUnitQuery HalfQuery(const std::vector<std::string>& flags) {
    MinimalUnitQuery q = Query(kHscale);
    q.unit = "src/half.cu";
    q.flags = flags;
    captured_half_ = Capture("src/half.cu", flags);
    q.captured_code = captured_half_;
    q.nvrtc = nvrtc_;
    return q;
  }
  std::string nvrtc_, captured_half_;
};

TEST_F(MinimalUnitNvrtcTest, IdenticalNvrtcBuildMakesItTheCompiler) {
  MinimalUnit mu = BuildMinimalUnit(HalfQuery({"-O3", "-std=c++17", "-Isrc/include", "-lineinfo"}));
  ASSERT_EQ(mu.outcome, "verified") << mu.reason;
  EXPECT_EQ(mu.compiler.tool, "nvrtc") << mu.compiler.reason;
  EXPECT_TRUE(mu.compiler.verified);
  EXPECT_TRUE(mu.compiler.reason.empty());
  EXPECT_GT(mu.compiler.nvrtc_seconds, 0);
  EXPECT_THAT(mu.text, HasSubstr("#include <cuda_fp16.h>"));
  EXPECT_FALSE(fs::exists(dir_ + "/" + kMinimalUnitFile));
}

TEST_F(MinimalUnitNvrtcTest, UnitNvrtcRejectsKeepsNvccWithTheReason) {
  // <type_traits>: nvcc has the host's C++ library, NVRTC has none (and
  // kerncap-nvrtc provides only the C-level headers, std_headers.h).
  std::ofstream(dir_ + "/src/traits.cu") << R"(#include <type_traits>
template <typename T>
__global__ void typed(T* x) { if (std::is_floating_point<T>::value) x[threadIdx.x] *= 2; }
template __global__ void typed<float>(float*);
)";
  MinimalUnitQuery q = Query("_Z5typedIfEvPT_");
  q.unit = "src/traits.cu";
  q.flags = {"-O3"};
  const std::string captured = Capture("src/traits.cu", q.flags);
  q.captured_code = captured;
  q.nvrtc = nvrtc_;
  MinimalUnit mu = BuildMinimalUnit(q);
  ASSERT_EQ(mu.outcome, "verified") << mu.reason;
  EXPECT_EQ(mu.compiler.tool, "nvcc");
  EXPECT_FALSE(mu.compiler.verified);
  EXPECT_THAT(mu.compiler.reason, HasSubstr("NVRTC rejected the minimal unit"));
  EXPECT_THAT(mu.compiler.reason, HasSubstr("type_traits"));
}

TEST_F(MinimalUnitNvrtcTest, StandardHeadersOfTheFirstFixtureAreProvided) {
  // The first fixture's unit includes <cstdint> (uint32_t, UINT32_MAX):
  // kerncap-nvrtc provides it, and the kernel is nvcc's.
  MinimalUnitQuery q = Query(kFused128);
  q.nvrtc = nvrtc_;
  MinimalUnit mu = BuildMinimalUnit(q);
  ASSERT_EQ(mu.outcome, "verified") << mu.reason;
  EXPECT_THAT(mu.text, HasSubstr("\n#include <cstdint>\n"));
  EXPECT_EQ(mu.compiler.tool, "nvrtc") << mu.compiler.reason;
}

TEST_F(MinimalUnitNvrtcTest, RefusedFlagKeepsNvccWithTheFlag) {
  // nvcc takes the front end's option; kerncap-nvrtc does not know it.
  MinimalUnit mu =
      BuildMinimalUnit(HalfQuery({"-O3", "-Isrc/include", "-Xcudafe", "--diag_suppress=177"}));
  ASSERT_EQ(mu.outcome, "verified") << mu.reason;
  EXPECT_EQ(mu.compiler.tool, "nvcc");
  EXPECT_THAT(mu.compiler.reason, HasSubstr("kerncap-nvrtc refused the flags"));
  EXPECT_THAT(mu.compiler.reason, HasSubstr("refused flag -Xcudafe"));
}

TEST_F(MinimalUnitNvrtcTest, DifferentNvrtcBuildKeepsNvcc) {
  // A stand-in kerncap-nvrtc that writes another kernel's code: the
  // comparison, not the exit status, decides.
  const std::string other = dir_ + "/other.cubin";
  // Same symbol, other code: a -G build of the same unit.
  auto r = RunTool(
      {nvcc_, "-cubin", "-arch=sm_90", "-O3", "-Isrc/include", "-G", "-o", other, "src/half.cu"},
      dir_, 300);
  ASSERT_TRUE(r.ok() && r->exit_code == 0);
  const std::string fake = dir_ + "/fake-nvrtc";
  std::ofstream(fake) << "#!/bin/sh\nwhile test $# -gt 1; do if test \"$1\" = -o; then cp " << other
                      << " \"$2\"; fi; shift; done\n";
  fs::permissions(fake, fs::perms::owner_all);
  MinimalUnitQuery q = HalfQuery({"-O3", "-Isrc/include"});
  q.nvrtc = fake;
  MinimalUnit mu = BuildMinimalUnit(q);
  ASSERT_EQ(mu.outcome, "verified") << mu.reason;
  EXPECT_EQ(mu.compiler.tool, "nvcc");
  EXPECT_FALSE(mu.compiler.verified);
  EXPECT_THAT(mu.compiler.reason, HasSubstr("NVRTC builds _Z6hscaleIfLi3EEvPK6__halfPT_fi "
                                            "differently from nvcc ("));
}

TEST_F(MinimalUnitNvrtcTest, SharedMemoryKernelThatNvrtcBuildsDifferentlyKeepsNvcc) {
  // NVRTC 13.0 addresses shared memory with 64-bit pointers where nvcc's
  // cicc uses 32-bit ones (PTX mov.u64 vs mov.u32 of the array): other code,
  // so the comparison keeps nvcc and names the difference. (Should a toolkit
  // build both alike, this case fails and the README's note is to be revised.)
  std::ofstream(dir_ + "/src/shared.cu") << R"(__global__ void partial(const float* x, float* y) {
  __shared__ float s[32];
  float v = x[blockIdx.x * blockDim.x + threadIdx.x];
  if (threadIdx.x % 32 == 0) s[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) y[blockIdx.x * 32 + threadIdx.x] = s[threadIdx.x];
}
)";
  MinimalUnitQuery q = Query("_Z7partialPKfPf");
  q.unit = "src/shared.cu";
  q.flags = {"-O3"};
  const std::string captured = Capture("src/shared.cu", q.flags);
  q.captured_code = captured;
  q.nvrtc = nvrtc_;
  MinimalUnit mu = BuildMinimalUnit(q);
  ASSERT_EQ(mu.outcome, "verified") << mu.reason;
  EXPECT_EQ(mu.compiler.tool, "nvcc");
  EXPECT_FALSE(mu.compiler.verified);
  EXPECT_THAT(mu.compiler.reason,
              HasSubstr("NVRTC builds _Z7partialPKfPf differently from nvcc (the code"));
}

TEST_F(MinimalUnitNvrtcTest, WithoutKerncapNvrtcItSaysSo) {
  MinimalUnitQuery q = HalfQuery({"-O3", "-Isrc/include"});
  q.nvrtc.clear();
  MinimalUnit mu = BuildMinimalUnit(q);
  ASSERT_EQ(mu.outcome, "verified") << mu.reason;
  EXPECT_EQ(mu.compiler.tool, "nvcc");
  EXPECT_THAT(mu.compiler.reason, HasSubstr("kerncap-nvrtc is not installed"));
  EXPECT_EQ(mu.compiler.nvrtc_seconds, 0);
}

TEST(MinimalUnitNoTools, WithoutTheSlicerItSaysSo) {
  MinimalUnitQuery q;
  q.nvcc = "/usr/local/cuda/bin/nvcc";
  MinimalUnit mu = BuildMinimalUnit(q);
  EXPECT_EQ(mu.outcome, "unavailable");
  EXPECT_THAT(mu.reason, HasSubstr("kerncap-cuda-slice is not installed"));
  EXPECT_FALSE(mu.verified());
}

TEST(MinimalUnitArgs, NvccPreprocessorFlagsBecomeClangOnes) {
  EXPECT_THAT(SlicerArgs({"-DA=1", "-D", "B", "--define-macro=C", "-UX", "-Iinc", "-I", "src/x",
                          "--include-path=p", "-isystem=/usr/local/cuda/include", "-isystem", "s",
                          "-std=c++17", "--std", "c++20", "-include", "pre.h", "-O3",
                          "-Xcompiler", "-fPIC", "-use_fast_math", "--expt-relaxed-constexpr",
                          "-x", "cu", "-lineinfo"}),
              ElementsAre("-DA=1", "-DB", "-DC", "-UX", "-Iinc", "-Isrc/x", "-Ip", "-isystem",
                          "/usr/local/cuda/include", "-isystem", "s", "-std=c++17", "-std=c++20",
                          "-include", "pre.h"));
  EXPECT_THAT(SlicerArgs({"-D"}), ElementsAre());  // a flag missing its value
}

TEST(MinimalUnitPrint, DifferencesAreNamed) {
  KernelPrint a;
  a.code = "abcd";
  a.registers = 20;
  a.shared_bytes = 1024;
  a.constant0_bytes = 544;
  KernelPrint b = a;
  EXPECT_TRUE(a == b);
  EXPECT_EQ(DescribeDifference(a, b), "nothing");
  b.shared_bytes = -1;
  EXPECT_FALSE(a == b);
  EXPECT_EQ(DescribeDifference(a, b), "the kernel's static shared memory (1024 bytes vs none)");
  b = a;
  b.code = "abce";
  b.registers = 22;
  b.relocations = {"16:2:g"};
  EXPECT_EQ(DescribeDifference(a, b),
            "the code (4 bytes each, different), the register count (20 vs 22), its relocations "
            "(0 vs 1)");
}

TEST(MinimalUnitArgs, ArchMacro) {
  EXPECT_EQ(CudaArchMacro("sm_90"), "900");
  EXPECT_EQ(CudaArchMacro("sm_90a"), "900");
  EXPECT_EQ(CudaArchMacro("sm_120"), "1200");
  EXPECT_EQ(CudaArchMacro("gfx90a"), "");
  EXPECT_EQ(CudaArchMacro("sm_"), "");
}

MakefileSpec CudaSpec() {
  MakefileSpec s;
  s.lang = Language::kCuda;
  s.arch = "sm_90";
  s.captured_code = "code/kernel.cubin";
  s.has_source = true;
  s.source = "src/app.cu";
  s.headers = {"src/include/helpers.cuh"};
  s.flags = {"-O3", "-Isrc/include"};
  return s;
}

TEST(MinimalUnitMakefile, RecompileCompilesTheMinimalUnitAndFullTheWholeOne) {
  MakefileSpec s = CudaSpec();
  s.minimal_unit = "kernel.cu";
  const std::string mk = BuildMakefile(s).value();
  EXPECT_THAT(mk, HasSubstr("MINIMAL_SRC := kernel.cu\n"));
  EXPECT_THAT(mk, HasSubstr("$(BUILT_CODE): $(MINIMAL_SRC)\n"));
  EXPECT_THAT(mk, HasSubstr("$(NVCC) -cubin -arch=$(ARCH) $(FLAGS) -o $@ $(MINIMAL_SRC)"));
  EXPECT_THAT(mk, HasSubstr("recompile-full:\n"));
  EXPECT_THAT(mk, HasSubstr("$(NVCC) -cubin -arch=$(ARCH) $(FLAGS) -o $(BUILT_CODE) $(SRC)"));
  EXPECT_THAT(mk, HasSubstr("recompile: $(MINIMAL_SRC), the minimal unit"));
  EXPECT_THAT(mk, HasSubstr("-newer $(MINIMAL_SRC)"));
  EXPECT_THAT(mk, HasSubstr("$(BUILD)/kernel.ptx: $(MINIMAL_SRC)\n"));
}

TEST(MinimalUnitMakefile, VerifiedNvrtcIsRecompilesCompilerAndNvccStaysAvailable) {
  MakefileSpec s = CudaSpec();
  s.minimal_unit = "kernel.cu";
  s.nvrtc = "/opt/kerncap/bin/kerncap-nvrtc";
  const std::string mk = BuildMakefile(s).value();
  EXPECT_THAT(mk, HasSubstr("NVRTC ?= /opt/kerncap/bin/kerncap-nvrtc\nCOMPILER ?= nvrtc\n"));
  EXPECT_THAT(mk, HasSubstr("ifeq ($(RECOMPILE_WITH),nvrtc)\n"));
  EXPECT_THAT(mk, HasSubstr("\t$(NVRTC) --nvcc=$(NVCC) -arch=$(ARCH) $(FLAGS) -o $@ "
                            "$(MINIMAL_SRC) || { rc=$$?; test $$rc -eq 3 || exit $$rc;"));
  // No libnvrtc for $(NVCC) (exit 3): nvcc compiles.
  EXPECT_THAT(mk, HasSubstr("$(MAKE) --no-print-directory COMPILER=nvcc $@; }\nelse\n"));
  EXPECT_THAT(mk, HasSubstr("the minimal unit, with kerncap-nvrtc"));
  // nvcc in the else branch, and recompile-full.
  EXPECT_THAT(mk,
              HasSubstr("\t$(NVCC) -cubin -arch=$(ARCH) $(FLAGS) -o $@ $(MINIMAL_SRC)\nendif\n"));
  EXPECT_THAT(mk, HasSubstr("$(NVCC) -cubin -arch=$(ARCH) $(FLAGS) -o $(BUILT_CODE) $(SRC)"));
  // Relocatable device code: never NVRTC.
  s.relocatable_device_code = true;
  const std::string rdc = BuildMakefile(s).value();
  EXPECT_THAT(rdc, Not(HasSubstr("NVRTC ?=")));
  EXPECT_THAT(rdc, Not(HasSubstr("$(NVRTC)")));
}

TEST(MinimalUnitMakefile, NvccMinimalUnitSaysWhyNotNvrtc) {
  MakefileSpec s = CudaSpec();
  s.minimal_unit = "kernel.cu";
  s.no_nvrtc_reason = "NVRTC rejected the minimal unit: cannot open source file 'cstdint'";
  const std::string mk = BuildMakefile(s).value();
  EXPECT_THAT(mk, Not(HasSubstr("NVRTC ?=")));
  EXPECT_THAT(mk, HasSubstr("the minimal unit, with nvcc (not NVRTC: NVRTC rejected the minimal "
                            "unit: cannot open source file cstdint;"));
}

TEST(MinimalUnitMakefile, FallbackSaysWhyAndQuotesSafely) {
  MakefileSpec s = CudaSpec();
  s.minimal_unit_reason = "differs: it's $(HOME) # not\nsafe \\";
  const std::string mk = BuildMakefile(s).value();
  EXPECT_THAT(mk, Not(HasSubstr("MINIMAL_SRC")));
  EXPECT_THAT(mk, HasSubstr("$(BUILT_CODE): $(SRC) $(HEADERS)\n"));
  EXPECT_THAT(mk, HasSubstr("@echo 'recompile: the whole unit $(SRC) (no minimal unit: differs: "
                            "its $$(HOME) \\# not safe /)'\n"));
  EXPECT_THAT(mk, HasSubstr("recompile-full:\n"));
}

}  // namespace
}  // namespace kerncap::repro
