// Tests of the AMDGPU code object reader against real code objects compiled
// from tests/hsa_sim/kernels/kernels.hip by clang-15 (gfx90a, gfx1030; code
// object v4 and v5), and against malformed inputs.
#include "common/hsa/code_object.h"

#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kerncap::hsa {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string CodeObject(const std::string& name) {
  return ReadFile(std::string(KERNCAP_HSA_TEST_CO_DIR) + "/" + name);
}

class RealCodeObjectTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    bytes_ = CodeObject(GetParam());
    if (bytes_.empty()) GTEST_SKIP() << "test code object " << GetParam() << " not built";
  }
  std::string bytes_;
};

TEST_P(RealCodeObjectTest, ParsesKernelsAndArgs) {
  auto md = ParseCodeObjectMetadata(bytes_);
  ASSERT_TRUE(md.ok()) << md.error();
  EXPECT_EQ(md->version.size(), 2u);
  EXPECT_EQ(md->version[0], 1u);
  const std::string arch = GetParam().find("gfx1030") != std::string::npos ? "gfx1030" : "gfx90a";
  EXPECT_EQ(GfxArchOf(md->target), arch);

  const KernelMetadata* va = md->FindKernel("vector_add");
  ASSERT_NE(va, nullptr);
  EXPECT_EQ(va->symbol, "vector_add.kd");
  EXPECT_EQ(md->FindKernel("vector_add.kd"), va);
  ASSERT_TRUE(va->kernarg_segment_size.has_value());
  ASSERT_GE(va->args.size(), 4u);
  EXPECT_EQ(va->args[0].offset, 0u);
  EXPECT_EQ(va->args[0].size, 8u);
  EXPECT_EQ(va->args[0].value_kind, "global_buffer");
  EXPECT_EQ(va->args[0].address_space, "global");
  EXPECT_EQ(va->args[0].name, "a");
  EXPECT_EQ(va->args[1].offset, 8u);
  EXPECT_EQ(va->args[2].offset, 16u);
  EXPECT_EQ(va->args[3].offset, 24u);
  EXPECT_EQ(va->args[3].value_kind, "by_value");
  EXPECT_EQ(va->args[3].size, 4u);
  EXPECT_EQ(va->args[3].name, "n");
  EXPECT_EQ(va->wavefront_size, arch == "gfx1030" ? 32u : 64u);
  EXPECT_GT(va->sgpr_count, 0u);
  EXPECT_GT(va->vgpr_count, 0u);
  // Code object v5 always carries hidden arguments after the explicit ones
  // (v4 only when the kernel uses them).
  bool hidden = false;
  for (const KernelArg& a : va->args) {
    EXPECT_LE(a.offset + a.size, *va->kernarg_segment_size);
    hidden |= a.hidden();
  }
  EXPECT_EQ(hidden, GetParam().find("_v5") != std::string::npos);

  const KernelMetadata* sc = md->FindKernel("scale_inplace");
  ASSERT_NE(sc, nullptr);
  EXPECT_EQ(sc->args[1].value_kind, "by_value");
  EXPECT_EQ(sc->args[1].offset, 8u);

  // The C++ template instance keeps its mangled name.
  bool found_fill = false;
  for (const KernelMetadata& k : md->kernels) found_fill |= k.name == "_ZN2kc4fillIiEEvPT_S1_i";
  EXPECT_TRUE(found_fill);
}

TEST_P(RealCodeObjectTest, FindsVariablesAndDescriptors) {
  auto syms = ParseCodeObjectSymbols(bytes_);
  ASSERT_TRUE(syms.ok()) << syms.error();
  bool scale_bias = false, counter = false;
  for (const auto& v : syms->variables) {
    if (v.name == "kc_scale_bias") {
      scale_bias = true;
      EXPECT_EQ(v.size, 16u);
    }
    if (v.name == "kc_device_counter") counter = true;
  }
  EXPECT_TRUE(scale_bias);
  EXPECT_TRUE(counter);
  bool kd = false;
  for (const auto& d : syms->kernel_descriptors) kd |= d.name == "vector_add.kd";
  EXPECT_TRUE(kd);
}

TEST_P(RealCodeObjectTest, TruncationsNeverCrash) {
  // Every prefix is either parsed or rejected with a message.
  for (size_t n = 0; n < bytes_.size(); n += 97) {
    auto md = ParseCodeObjectMetadata(std::string_view(bytes_.data(), n));
    if (!md.ok()) {
      EXPECT_FALSE(md.error().empty());
    }
    auto syms = ParseCodeObjectSymbols(std::string_view(bytes_.data(), n));
    if (!syms.ok()) {
      EXPECT_FALSE(syms.error().empty());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Arches, RealCodeObjectTest,
                         ::testing::Values("kernels_gfx90a_v4.hsaco", "kernels_gfx90a_v5.hsaco",
                                           "kernels_gfx1030_v4.hsaco"));

TEST(CodeObjectV5Test, HasRuntimeHiddenArguments) {
  std::string bytes = CodeObject("kernels_gfx90a_v5.hsaco");
  if (bytes.empty()) GTEST_SKIP() << "v5 code object not built";
  auto md = ParseCodeObjectMetadata(bytes);
  ASSERT_TRUE(md.ok()) << md.error();
  const KernelMetadata* va = md->FindKernel("vector_add");
  ASSERT_NE(va, nullptr);
  std::map<std::string, uint32_t> kinds;
  for (const KernelArg& a : va->args) kinds[a.value_kind] = a.offset;
  EXPECT_TRUE(kinds.count("hidden_block_count_x"));
  EXPECT_TRUE(kinds.count("hidden_queue_ptr") || kinds.count("hidden_hostcall_buffer"));
}

TEST(CodeObjectTest, AssemblyKernelWithoutKernargSize) {
  std::string bytes = CodeObject("tensile_like_gfx90a.hsaco");
  if (bytes.empty()) GTEST_SKIP() << "assembly test code object not built";
  auto md = ParseCodeObjectMetadata(bytes);
  ASSERT_TRUE(md.ok()) << md.error();
  const KernelMetadata* k = md->FindKernel("tensile_like");
  ASSERT_NE(k, nullptr);
  EXPECT_FALSE(k->kernarg_segment_size.has_value());
}

TEST(CodeObjectTest, RejectsGarbage) {
  EXPECT_THAT(ParseCodeObjectMetadata("").error(), HasSubstr("too short"));
  EXPECT_THAT(ParseCodeObjectMetadata(std::string(64, 'x')).error(), HasSubstr("not an ELF"));
  std::string elf32(64, '\0');
  elf32.replace(0, 4, "\x7f" "ELF");
  elf32[4] = 1;  // ELFCLASS32
  EXPECT_THAT(ParseCodeObjectMetadata(elf32).error(), HasSubstr("ELF64"));
}

TEST(MetadataNoteTest, RejectsMalformedMsgpack) {
  EXPECT_FALSE(ParseMetadataNote("").ok());
  EXPECT_FALSE(ParseMetadataNote("\xc1").ok());            // reserved msgpack byte
  EXPECT_FALSE(ParseMetadataNote("\x93\x01\x02").ok());    // truncated array
  EXPECT_THAT(ParseMetadataNote("\x01").error(), HasSubstr("not a map"));
  EXPECT_THAT(ParseMetadataNote("\x80").error(), HasSubstr("amdhsa.version"));
}

// Found by the fuzzer: LLVM's msgpack::Document hits llvm_unreachable on a
// map key that is a container; the reader must reject it first.
TEST(MetadataNoteTest, RejectsContainerMapKeys) {
  EXPECT_THAT(ParseMetadataNote(std::string("\x81\x91\x01\x01", 4)).error(),
              HasSubstr("not a scalar"));
  EXPECT_THAT(ParseMetadataNote(std::string("\x81\x80\x01", 3)).error(),
              HasSubstr("not a scalar"));
  // Deep nesting is bounded.
  EXPECT_THAT(ParseMetadataNote(std::string(100, '\x92')).error(), HasSubstr("deep"));
  EXPECT_THAT(ParseMetadataNote(std::string(100, '\x91')).error(), HasSubstr("truncated"));
}

// Hand-built msgpack: {"amdhsa.version":[1,2],"amdhsa.kernels":[{".name":"k",
// ".args":[{".offset":0,".size":8}]}]} (missing .value_kind).
TEST(MetadataNoteTest, RejectsArgWithoutKind) {
  std::string m;
  m += "\x82";
  m += "\xae" "amdhsa.version";
  m += "\x92\x01\x02";
  m += "\xae" "amdhsa.kernels";
  m += "\x91\x82";
  m += "\xa5" ".name" "\xa1" "k";
  m += "\xa5" ".args";
  m += "\x91\x82";
  m += "\xa7" ".offset";
  m += std::string(1, '\0');
  m += "\xa5" ".size" "\x08";
  auto md = ParseMetadataNote(m);
  ASSERT_FALSE(md.ok());
  EXPECT_THAT(md.error(), HasSubstr(".value_kind"));
}

TEST(MetadataNoteTest, RejectsWrongTypes) {
  std::string m;
  m += "\x82";
  m += "\xae" "amdhsa.version";
  m += "\x92\x01\x02";
  m += "\xae" "amdhsa.kernels";
  m += "\x91\x82";
  m += "\xa5" ".name" "\xa1" "k";
  m += "\xb5" ".kernarg_segment_size";
  m += "\xa3" "big";
  auto md = ParseMetadataNote(m);
  ASSERT_FALSE(md.ok());
  EXPECT_THAT(md.error(), HasSubstr(".kernarg_segment_size"));
}

TEST(KernelDescriptorTest, Decodes) {
  std::string kd(64, '\0');
  uint32_t group = 256, priv = 16, kernarg = 288;
  memcpy(kd.data(), &group, 4);
  memcpy(kd.data() + 4, &priv, 4);
  memcpy(kd.data() + 8, &kernarg, 4);
  auto d = ParseKernelDescriptor(kd);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->group_segment_fixed_size, 256u);
  EXPECT_EQ(d->private_segment_fixed_size, 16u);
  EXPECT_EQ(d->kernarg_size, 288u);
  EXPECT_FALSE(ParseKernelDescriptor(kd.substr(0, 63)).ok());
}

TEST(GfxArchTest, Extracts) {
  EXPECT_EQ(GfxArchOf("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-"), "gfx90a");
  EXPECT_EQ(GfxArchOf("amdgcn-amd-amdhsa--gfx1030"), "gfx1030");
  EXPECT_EQ(GfxArchOf("nothing"), "");
}

}  // namespace
}  // namespace kerncap::hsa
