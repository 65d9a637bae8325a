#include "common/cuda/cubin_elf.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace kerncap::cubin {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const CubinVariable* Find(const CubinInfo& info, const std::string& name) {
  for (const auto& v : info.variables) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

TEST(CubinElfTest, EnumeratesDeviceAndConstantVariablesOfARealCubin) {
  const std::string dir = KERNCAP_TEST_CUBIN_DIR;
  if (dir.empty()) GTEST_SKIP() << "nvcc was not found at configure time; no test cubin built";
  const std::string path = dir + "/globals_sm90.cubin";
  std::string image = ReadFile(path);
  ASSERT_FALSE(image.empty()) << "cannot read " << path;
  ASSERT_TRUE(IsElf(image));
  auto info = ParseCubin(image);
  ASSERT_TRUE(info.ok()) << info.error();

  const CubinVariable* scale = Find(*info, "dev_scale");
  ASSERT_NE(scale, nullptr);
  EXPECT_FALSE(scale->constant);
  EXPECT_EQ(scale->size, 4u);
  EXPECT_EQ(scale->section.rfind(".nv.global", 0), 0u);

  const CubinVariable* table = Find(*info, "dev_table");
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->size, 64u * 8u);
  ASSERT_NE(Find(*info, "dev_counter"), nullptr);

  const CubinVariable* coeffs = Find(*info, "const_coeffs");
  ASSERT_NE(coeffs, nullptr);
  EXPECT_TRUE(coeffs->constant);
  EXPECT_EQ(coeffs->size, 64u);
  EXPECT_EQ(coeffs->section, ".nv.constant3");
  const CubinVariable* mode = Find(*info, "const_mode");
  ASSERT_NE(mode, nullptr);
  EXPECT_TRUE(mode->constant);

  // Parameter banks (.nv.constant0.*) are not variables.
  for (const auto& v : info->variables) EXPECT_NE(v.section.rfind(".nv.constant0", 0), 0u) << v.name;

  auto has_kernel = [&](const std::string& k) {
    return std::find(info->kernels.begin(), info->kernels.end(), k) != info->kernels.end();
  };
  EXPECT_TRUE(has_kernel("scale_kernel"));
  EXPECT_TRUE(has_kernel("_Z16templated_kernelIiEvPT_"));
}

TEST(CubinElfTest, FindsTextureAndSurfaceInstructionsPerKernel) {
  std::string path = KERNCAP_TEST_TEXTURE_CUBIN;
  if (path.empty()) GTEST_SKIP() << "nvcc was not found at configure time; no test cubin built";
  std::string image = ReadFile(path);
  ASSERT_FALSE(image.empty()) << "cannot read " << path;
  auto info = ParseCubin(image);
  ASSERT_TRUE(info.ok()) << info.error();
  EXPECT_EQ(info->sm, 90u);
  auto use = [&](const std::string& k) { return KernelTextureUse(*info, k); };
  for (const char* k : {"tex_linear", "tex_filtered", "tex_from_memory"}) {
    EXPECT_TRUE(use(k).known) << k;
    EXPECT_TRUE(use(k).texture) << k;
    EXPECT_FALSE(use(k).surface) << k;
  }
  EXPECT_TRUE(use("surf_write").known);
  EXPECT_TRUE(use("surf_write").surface);
  EXPECT_FALSE(use("surf_write").texture);
  for (const char* k : {"no_texture", "no_texture_atomics"}) {
    EXPECT_TRUE(use(k).known) << k;
    EXPECT_FALSE(use(k).texture) << k;
    EXPECT_FALSE(use(k).surface) << k;
  }
  EXPECT_FALSE(use("not_a_kernel").known);  // unknown kernels are unknown, not "no textures"
}

TEST(CubinElfTest, TextureUseOfCalledDeviceFunctionsCountsForEveryKernel) {
  std::string path = KERNCAP_TEST_TEXTURE_RDC_CUBIN;
  if (path.empty()) GTEST_SKIP() << "nvcc was not found at configure time; no test cubin built";
  auto info = ParseCubin(ReadFile(path));
  ASSERT_TRUE(info.ok()) << info.error();
  // fetch() is a function of its own (not a kernel): its TLD counts for both
  // kernels, since the cubin does not say which calls it.
  EXPECT_EQ(info->texture_use.count("fetch"), 0u);
  EXPECT_TRUE(KernelTextureUse(*info, "calls_fetch").texture);
  EXPECT_TRUE(KernelTextureUse(*info, "plain").texture);
}

TEST(CubinElfTest, TextureUseIsUnknownForEncodingsItCannotRead) {
  std::string path = KERNCAP_TEST_TEXTURE_CUBIN;
  if (path.empty()) GTEST_SKIP() << "nvcc was not found at configure time; no test cubin built";
  std::string image = ReadFile(path);
  ASSERT_GT(image.size(), 0x32u);
  image[0x31] = 0x35;  // e_flags SM field: sm_53 (64-bit encodings)
  auto info = ParseCubin(image);
  ASSERT_TRUE(info.ok()) << info.error();
  EXPECT_EQ(info->sm, 53u);
  EXPECT_FALSE(KernelTextureUse(*info, "tex_linear").known);
  EXPECT_FALSE(KernelTextureUse(*info, "no_texture").known);
}

// Whole-program compilation gives every variable internal linkage; an -rdc
// build keeps `static` ones local, externals global, and a relocatable cubin
// types its variables 13 (STT_CUDA_OBJECT) instead of STT_OBJECT.
TEST(CubinElfTest, ReportsLinkageAndReadsRelocatableCubins) {
  const std::string dir = KERNCAP_TEST_CUBIN_DIR;
  if (dir.empty()) GTEST_SKIP() << "nvcc was not found at configure time; no test cubin built";
  for (const char* name : {"internal_rdc_a.cubin", "internal_rel_a.cubin"}) {
    SCOPED_TRACE(name);
    const std::string image = ReadFile(dir + "/" + name);
    ASSERT_FALSE(image.empty()) << "cannot read " << name;
    auto info = ParseCubin(image);
    ASSERT_TRUE(info.ok()) << info.error();
    const CubinVariable* plain = Find(*info, "plain_global");
    ASSERT_NE(plain, nullptr);
    EXPECT_FALSE(plain->local);
    EXPECT_EQ(plain->size, 4u);
    size_t local_statics = 0;
    for (const CubinVariable& v : info->variables) {
      if (v.name.rfind("__nv_static_", 0) == 0) {
        EXPECT_TRUE(v.local) << v.name;
        ++local_statics;
      }
    }
    // scale_v, mode_c, tmpl_v<float>, counter, coef_c, outer::nested, v2::versioned
    EXPECT_EQ(local_statics, 7u);
  }
  auto whole = ParseCubin(ReadFile(dir + "/internal_a.cubin"));
  ASSERT_TRUE(whole.ok()) << whole.error();
  const CubinVariable* counter = Find(*whole, "counter");
  ASSERT_NE(counter, nullptr);
  EXPECT_TRUE(counter->local);
}

TEST(CubinElfTest, RejectsGarbageWithoutCrashing) {
  EXPECT_FALSE(ParseCubin("").ok());
  EXPECT_FALSE(ParseCubin("not an elf at all").ok());
  std::string truncated = "\x7f" "ELF\x02\x01\x01";
  EXPECT_FALSE(ParseCubin(truncated).ok());
  // A valid header whose section table points past the end.
  std::string bad(64, '\0');
  bad[0] = 0x7f; bad[1] = 'E'; bad[2] = 'L'; bad[3] = 'F'; bad[4] = 2;
  bad[0x28] = static_cast<char>(0xff);  // e_shoff
  bad[0x3a] = 64;                        // e_shentsize
  bad[0x3c] = 5;                         // e_shnum
  EXPECT_FALSE(ParseCubin(bad).ok());
}

}  // namespace
}  // namespace kerncap::cubin
