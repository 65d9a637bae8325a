#include "reproducer/generator/command_rewriter.h"

#include "gtest/gtest.h"
#include "reproducer/generator/path_util.h"

namespace kerncap::repro {
namespace {

CompileCommand Cmd(std::vector<std::string> argv) {
  CompileCommand c;
  c.directory = "/app/build";
  c.file = "/app/src/k.cu";
  c.argv = std::move(argv);
  return c;
}

TEST(CommandRewriterTest, CoreFlagsDropOutputArchAndSource) {
  CoreFlags core = ExtractCoreFlags(
      Cmd({"/usr/local/cuda/bin/nvcc", "-O3", "-gencode", "arch=compute_90,code=sm_90",
           "-arch=sm_80", "-ccbin", "/usr/bin/g++-12", "-MD", "-MF", "k.d", "-c", "../src/k.cu",
           "-o", "k.o", "-DN=4", "-Xcompiler", "-fPIC", "-lineinfo"}),
      "/app/src/k.cu", Language::kCuda);
  EXPECT_EQ(core.tool, "nvcc");
  EXPECT_EQ(core.flags,
            (std::vector<std::string>{"-O3", "-DN=4", "-Xcompiler", "-fPIC", "-lineinfo"}));
  EXPECT_EQ(core.dropped.size(), 8u);  // -gencode -arch -ccbin -MD -MF -c source -o
  // A .cpp compiled as CUDA (CMake's "-x cu", also on .cu files) keeps its
  // language; CMake's "--generate-code=..." form is an architecture; its
  // -rdc=true (separable compilation) would make a relocatable cubin.
  core = ExtractCoreFlags(Cmd({"nvcc", "-x", "cu", "--generate-code=arch=compute_90,code=[sm_90]",
                               "-rdc=true", "-c", "../src/k.cu"}),
                          "/app/src/k.cu", Language::kCuda);
  EXPECT_EQ(core.flags, (std::vector<std::string>{"-x", "cu"}));
  EXPECT_EQ(core.dropped.size(), 4u);  // --generate-code, -rdc=true, -c, the source
  EXPECT_TRUE(core.relocatable_device_code);
  EXPECT_FALSE(ExtractCoreFlags(Cmd({"nvcc", "-rdc", "false", "-c", "../src/k.cu"}),
                                "/app/src/k.cu", Language::kCuda)
                   .relocatable_device_code);
  EXPECT_TRUE(ExtractCoreFlags(Cmd({"nvcc", "-dc", "../src/k.cu"}), "/app/src/k.cu",
                               Language::kCuda)
                  .relocatable_device_code);
}

TEST(CommandRewriterTest, HipCoreFlags) {
  CoreFlags core = ExtractCoreFlags(
      Cmd({"clang++", "-x", "hip", "--offload-arch=gfx90a", "--offload-arch=gfx942",
           "--cuda-device-only", "-g", "-c", "../src/k.cu", "-o", "k.o"}),
      "/app/src/k.cu", Language::kHip);
  EXPECT_EQ(core.flags, (std::vector<std::string>{"-g"}));
}

TEST(CommandRewriterTest, PathsBecomeRelativeOrExternal) {
  auto has = [](const std::string& d) { return d == "include" || d == "gen"; };
  RelativeFlags r = MakeFlagsRelative(
      {"-I../include", "-I", "/app/gen", "-I/app/empty", "-isystem/usr/local/cuda/include",
       "-include", "/usr/include/hip/hip_runtime.h", "--rocm-device-lib-path=/opt/rocm/bc",
       "-B/usr/lib/llvm-15/bin", "-include", "../include/pre.h", "-DX=1", "-I/opt/rocm/bc"},
      "/app/build", "/app", has);
  EXPECT_EQ(r.flags,
            (std::vector<std::string>{"-Isrc/include", "-I", "src/gen", "-include",
                                      "hip/hip_runtime.h", "--rocm-device-lib-path=$(EXT_1)",
                                      "-B$(EXT_2)", "-include", "src/include/pre.h", "-DX=1"}));
  ASSERT_EQ(r.external.size(), 2u);
  EXPECT_EQ(r.external[0].first, "EXT_1");
  EXPECT_EQ(r.external[0].second, "/opt/rocm/bc");
  EXPECT_EQ(r.external[1].second, "/usr/lib/llvm-15/bin");
  // -I/app/empty (nothing copied there), the CUDA and ROCm include folders.
  EXPECT_EQ(r.dropped.size(), 3u);
}

TEST(CommandRewriterTest, DefaultFlagsAndModes) {
  EXPECT_EQ(DefaultFlags(Language::kCuda, {"include", "include", "."}),
            (std::vector<std::string>{"-O3", "-lineinfo", "-std=c++17", "-Isrc/include", "-Isrc"}));
  EXPECT_EQ(DeviceCompileMode(Language::kCuda, "sm_90"),
            (std::vector<std::string>{"-cubin", "-arch=sm_90"}));
  EXPECT_EQ(DeviceCompileMode(Language::kHip, "gfx90a").back(), "--offload-arch=gfx90a");
}

TEST(CommandRewriterTest, ShellQuote) {
  EXPECT_EQ(ShellQuote("-DX=1"), "-DX=1");
  EXPECT_EQ(ShellQuote("-DX=a b"), "'-DX=a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("$(EXT_1)"), "$(EXT_1)");
  EXPECT_EQ(ShellQuote("-DC=$HOME"), "'-DC=$HOME'");
}

TEST(PathUtilTest, Basics) {
  EXPECT_EQ(Normalize("../src/./k.cu", "/app/build"), "/app/src/k.cu");
  EXPECT_TRUE(IsUnder("/app/src/k.cu", "/app"));
  EXPECT_FALSE(IsUnder("/application/k.cu", "/app"));
  EXPECT_EQ(RelativeTo("/app/src/k.cu", "/app"), "src/k.cu");
  EXPECT_EQ(CommonAncestor({"/a/b/c", "/a/b/d/e", "/a/b"}), "/a/b");
  EXPECT_EQ(CommonAncestor({"/x/y", "/z"}), "/");
  EXPECT_TRUE(IsSystemPath("/usr/local/cuda-13.0/include/cuda.h"));
  EXPECT_TRUE(IsSystemPath("/opt/rocm-6.2/include/hip/hip_runtime.h"));
  EXPECT_FALSE(IsSystemPath("/home/me/app/k.cu"));
  EXPECT_EQ(SystemIncludeRelative("/usr/include/hip/hip_runtime.h"), "hip/hip_runtime.h");
  EXPECT_EQ(SystemIncludeRelative("/opt/rocm/include/hip/x.h"), "hip/x.h");
  EXPECT_EQ(SystemIncludeRelative("/home/me/x.h"), "");
}

}  // namespace
}  // namespace kerncap::repro
