#include "reproducer/generator/build_file.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace kerncap::repro {
namespace {

TEST(BuildFileTest, MakeWordEscapes) {
  EXPECT_EQ(MakeWord("-DX=1"), "-DX=1");
  EXPECT_EQ(MakeWord("--p=$(EXT_1)"), "--p=$(EXT_1)");
  EXPECT_EQ(MakeWord("-DC=$HOME"), "'-DC=$$HOME'");
  EXPECT_EQ(MakeWord("-DN=#x"), "'-DN=\\#x'");
}

TEST(BuildFileTest, CudaSourceProject) {
  MakefileSpec s;
  s.title = "Reproducer of scale";
  s.arch = "sm_90";
  s.captured_code = "code/kernel.cubin";
  s.has_source = true;
  s.source = "src/k.cu";
  s.headers = {"src/a.cuh"};
  s.flags = {"-O3", "-Isrc", "--x=$(EXT_1)"};
  s.external = {{"EXT_1", "/opt/x"}};
  std::string mk = BuildMakefile(s);
  for (const char* needle :
       {"NVCC ?= nvcc", "KERNCAP_REPLAY ?= kerncap-replay", "EXT_1 ?= /opt/x", "ARCH := sm_90",
        "$(NVCC) -cubin -arch=$(ARCH) $(FLAGS) -o $@ $(SRC)", "FLAGS := -O3 -Isrc --x=$(EXT_1)",
        "$(BUILT_CODE): $(SRC) $(HEADERS)", "-ptx -arch=compute_90", "$(PTXAS) -arch=$(ARCH)",
        "--code-object=$(BUILT_CODE)", "validate:", "bench:", "help:", "asm:"}) {
    EXPECT_TRUE(absl::StrContains(mk, needle)) << needle << "\n" << mk;
  }
}

TEST(BuildFileTest, BinaryOnlyAndHip) {
  MakefileSpec s;
  s.lang = Language::kHip;
  s.arch = "gfx90a";
  s.captured_code = "code/kernel.hsaco";
  s.no_source_reason = "no line table";
  s.clang_default = "clang-15";
  std::string mk = BuildMakefile(s);
  EXPECT_TRUE(absl::StrContains(mk, "recompile: no line table")) << mk;
  EXPECT_TRUE(absl::StrContains(mk, "CLANG ?= clang-15"));
  EXPECT_TRUE(absl::StrContains(mk, "--mcpu=$(ARCH)"));
  EXPECT_TRUE(absl::StrContains(mk, "not implemented for HIP yet"));
  EXPECT_FALSE(absl::StrContains(mk, "SRC :="));
  s.has_source = true;
  s.source = "src/k.hip";
  s.vfs_overlay = true;
  mk = BuildMakefile(s);
  EXPECT_TRUE(
      absl::StrContains(mk, "--offload-arch=$(ARCH) $(FLAGS) -ivfsoverlay vfs.yaml -o $@ $(SRC)"))
      << mk;
  EXPECT_TRUE(absl::StrContains(mk, "$(SRC) $(HEADERS) vfs.yaml"));
}

}  // namespace
}  // namespace kerncap::repro
