#include "common/cuda/symbol_identity.h"

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "common/cuda/cubin_elf.h"
#include "gtest/gtest.h"

namespace kerncap::cubin {
namespace {

// Symbols of one variable from two compiles of the same k.cu in two folders
// (nvcc 13.0, sm_90): only the module id's hash differs.
struct Pair {
  const char* a;
  const char* b;
  const char* stable;
};
constexpr Pair kSameVariable[] = {
    // anonymous namespace (the hard shape: a hash suffix ending in a digit
    // runs into the next component's length)
    {"_ZN34_INTERNAL_2b208ee9_4_k_cu_7ddce4e636_GLOBAL__N__2b208ee9_4_k_cu_7ddce4e67scale_vE",
     "_ZN34_INTERNAL_93c1f0aa_4_k_cu_7ddce4e636_GLOBAL__N__93c1f0aa_4_k_cu_7ddce4e67scale_vE",
     "_ZN9_INTERNAL12_GLOBAL__N_17scale_vE"},
    // a kernel-name suffix
    {"_ZN30_INTERNAL_bd0d3510_4_k_cu_kern32_GLOBAL__N__bd0d3510_4_k_cu_kern7scale_vE",
     "_ZN30_INTERNAL_082a8982_4_k_cu_kern32_GLOBAL__N__082a8982_4_k_cu_kern7scale_vE",
     "_ZN9_INTERNAL12_GLOBAL__N_17scale_vE"},
    // nested: outer::(anonymous)::nested
    {"_ZN30_INTERNAL_bd0d3510_4_k_cu_kern5outer32_GLOBAL__N__bd0d3510_4_k_cu_kern6nestedE",
     "_ZN30_INTERNAL_082a8982_4_k_cu_kern5outer32_GLOBAL__N__082a8982_4_k_cu_kern6nestedE",
     "_ZN9_INTERNAL5outer12_GLOBAL__N_16nestedE"},
    // anonymous-namespace variable template
    {"_ZN30_INTERNAL_bd0d3510_4_k_cu_kern32_GLOBAL__N__bd0d3510_4_k_cu_kern6tmpl_vIfEE",
     "_ZN30_INTERNAL_082a8982_4_k_cu_kern32_GLOBAL__N__082a8982_4_k_cu_kern6tmpl_vIfEE",
     "_ZN9_INTERNAL12_GLOBAL__N_16tmpl_vIfEE"},
    // static in a named namespace
    {"_ZN30_INTERNAL_bd0d3510_4_k_cu_kern2ns4sfooE", "_ZN30_INTERNAL_082a8982_4_k_cu_kern2ns4sfooE",
     "_ZN9_INTERNAL2ns4sfooE"},
    // -rdc: static __device__ / __constant__
    {"__nv_static_21__bd0d3510_4_k_cu_kern_counter", "__nv_static_21__082a8982_4_k_cu_kern_counter",
     "__nv_static__counter"},
    {"__nv_static_25__2b208ee9_4_k_cu_7ddce4e6_counter",
     "__nv_static_25__5e0f11c2_4_k_cu_7ddce4e6_counter", "__nv_static__counter"},
    // -rdc: anonymous namespace inside the wrapper
    {"__nv_static_21__bd0d3510_4_k_cu_kern__ZN30_INTERNAL_bd0d3510_4_k_cu_kern32_GLOBAL__N__"
     "bd0d3510_4_k_cu_kern7scale_vE",
     "__nv_static_21__082a8982_4_k_cu_kern__ZN30_INTERNAL_082a8982_4_k_cu_kern32_GLOBAL__N__"
     "082a8982_4_k_cu_kern7scale_vE",
     "__nv_static___ZN9_INTERNAL12_GLOBAL__N_17scale_vE"},
    // an anonymous-namespace kernel (whole program and -rdc)
    {"_ZN32_GLOBAL__N__bd0d3510_4_k_cu_kern11anon_kernelEPi",
     "_ZN32_GLOBAL__N__082a8982_4_k_cu_kern11anon_kernelEPi", "_ZN12_GLOBAL__N_111anon_kernelEPi"},
    // __managed__ in an anonymous namespace; a named namespace around one
    {"_ZN28_INTERNAL_5113dcee_4_m_cu_mk30_GLOBAL__N__5113dcee_4_m_cu_mk6mscaleE",
     "_ZN28_INTERNAL_d787ae40_4_m_cu_mk30_GLOBAL__N__d787ae40_4_m_cu_mk6mscaleE",
     "_ZN9_INTERNAL12_GLOBAL__N_16mscaleE"},
    {"_ZN28_INTERNAL_5113dcee_4_m_cu_mk6detail30_GLOBAL__N__5113dcee_4_m_cu_mk3tblE",
     "_ZN28_INTERNAL_d787ae40_4_m_cu_mk6detail30_GLOBAL__N__d787ae40_4_m_cu_mk3tblE",
     "_ZN9_INTERNAL6detail12_GLOBAL__N_13tblE"},
    // -rdc: `static inline __device__` and a static __managed__
    {"__nv_static_19__5113dcee_4_m_cu_mk_inl_v", "__nv_static_19__d787ae40_4_m_cu_mk_inl_v",
     "__nv_static__inl_v"},
    {"__nv_static_19__5113dcee_4_m_cu_mk_mcount", "__nv_static_19__d787ae40_4_m_cu_mk_mcount",
     "__nv_static__mcount"},
    // CCCL's internal constants (a mangled first-kernel suffix)
    {"_ZN33_INTERNAL_452c0623_5_cc_cu__Z1kPi4cuda3std3__45__cpo5beginE",
     "_ZN33_INTERNAL_0d9e1b77_5_cc_cu__Z1kPi4cuda3std3__45__cpo5beginE",
     "_ZN9_INTERNAL4cuda3std3__45__cpo5beginE"},
    {"_ZN33_INTERNAL_452c0623_5_cc_cu__Z1kPi4cuda3std3__435_GLOBAL__N__452c0623_5_cc_cu__Z1kPi6"
     "ignoreE",
     "_ZN33_INTERNAL_0d9e1b77_5_cc_cu__Z1kPi4cuda3std3__435_GLOBAL__N__0d9e1b77_5_cc_cu__Z1kPi6"
     "ignoreE",
     "_ZN9_INTERNAL4cuda3std3__412_GLOBAL__N_16ignoreE"},
    {"_ZN33_INTERNAL_452c0623_5_cc_cu__Z1kPi6thrust23THRUST_300001_SM_900_NS8cuda_cub3parE",
     "_ZN33_INTERNAL_0d9e1b77_5_cc_cu__Z1kPi6thrust23THRUST_300001_SM_900_NS8cuda_cub3parE",
     "_ZN9_INTERNAL6thrust23THRUST_300001_SM_900_NS8cuda_cub3parE"},
};

TEST(SymbolIdentityTest, TwoCompilesOfOneVariableGetOneStableName) {
  for (const Pair& p : kSameVariable) {
    SCOPED_TRACE(p.a);
    EXPECT_EQ(StableSymbolName(p.a), p.stable);
    EXPECT_EQ(StableSymbolName(p.b), p.stable);
    EXPECT_TRUE(HasCompileUniquifier(p.a));
  }
}

TEST(SymbolIdentityTest, DifferentVariablesStayDifferent) {
  std::map<std::string, std::string> seen;  // stable -> a
  for (const Pair& p : kSameVariable) {
    auto [it, inserted] = seen.emplace(StableSymbolName(p.a), p.a);
    // Two pairs deliberately repeat a variable (scale_v and counter, under
    // two differently shaped module ids); every other one is distinct.
    if (!inserted) {
      EXPECT_TRUE(it->first == "_ZN9_INTERNAL12_GLOBAL__N_17scale_vE" ||
                  it->first == "__nv_static__counter")
          << p.a;
    }
  }
  EXPECT_NE(StableSymbolName("__nv_static_21__bd0d3510_4_k_cu_kern_counter"),
            StableSymbolName("__nv_static_21__bd0d3510_4_k_cu_kern_counte2"));
}

TEST(SymbolIdentityTest, NamesWithoutAUniquifierAreTheirOwnStableName) {
  for (const char* s : {"counter", "plain_global", "_Z6kernelPf", "_ZN12_GLOBAL__N_13fooE",
                        "_ZN5outer5innerE", "kc_bias", "__nv_static_", "_INTERNAL_",
                        "12_INTERNAL_", "_ZN40_INTERNAL_notahex_4_k_cu_x3fooE",
                        "__nv_static_99999999999_x", "__nv_static_5__abc_x", ""}) {
    SCOPED_TRACE(s);
    EXPECT_EQ(StableSymbolName(s), s);
    EXPECT_FALSE(HasCompileUniquifier(s));
  }
}

TEST(SymbolIdentityTest, TruncatedOrLyingLengthsAreLeftAlone) {
  // The length says more than the symbol holds.
  EXPECT_EQ(StableSymbolName("_ZN90_INTERNAL_bd0d3510_4_k_cu_kern3fooE"),
            "_ZN90_INTERNAL_bd0d3510_4_k_cu_kern3fooE");
  // The file-name length runs past the component.
  EXPECT_EQ(StableSymbolName("_ZN30_INTERNAL_bd0d3510_9_k_cu_kern3fooE"),
            "_ZN30_INTERNAL_bd0d3510_9_k_cu_kern3fooE");
  // Cut in the middle of the wrapper.
  EXPECT_EQ(StableSymbolName("__nv_static_21__bd0d3510_4_k"), "__nv_static_21__bd0d3510_4_k");
}

// A namespace "v2" before an anonymous namespace: the digits "2" + "32" run
// together. Both 32 and 232 parse when the symbol is long enough; the module
// id of the unambiguous _INTERNAL_ component decides.
TEST(SymbolIdentityTest, AmbiguousLengthDigitsAreResolvedByTheUnitsModuleId) {
  const std::string id = "bd0d3510_4_k_cu_kern";
  const std::string tail(260, 'x');
  const std::string with_internal = "_ZN30_INTERNAL_" + id + "2v232_GLOBAL__N__" + id + "3" +
                                    tail.substr(0, 3) + "E" + tail;
  EXPECT_EQ(StableSymbolName(with_internal),
            "_ZN9_INTERNAL2v212_GLOBAL__N_13xxxE" + tail);
  // Without it the component is left unnormalised: no identity rather than a wrong one.
  const std::string alone = "_ZN2v232_GLOBAL__N__" + id + "3xxxE" + tail;
  EXPECT_EQ(StableSymbolName(alone), alone);
}

TEST(SymbolIdentityTest, RdcIndependentNameDropsOnlyTheWrapper) {
  EXPECT_EQ(RdcIndependentName("__nv_static__counter"), "counter");
  EXPECT_EQ(RdcIndependentName("__nv_static___ZN9_INTERNAL12_GLOBAL__N_17scale_vE"),
            "_ZN9_INTERNAL12_GLOBAL__N_17scale_vE");
  EXPECT_EQ(RdcIndependentName("counter"), "counter");
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The real thing: testdata/internal_linkage.cu compiled from two folders
// (with and without -rdc). Every variable of one compile has exactly one
// variable of the same stable name and size in the other, and stable names
// are unique within a module.
TEST(SymbolIdentityTest, RealCubinsFromTwoFoldersMatchVariableByVariable) {
  const std::string dir = KERNCAP_TEST_CUBIN_DIR;
  if (dir.empty()) GTEST_SKIP() << "nvcc was not found at configure time; no test cubins built";
  for (const char* kind : {"internal", "internal_rdc"}) {
    SCOPED_TRACE(kind);
    auto a = ParseCubin(ReadFile(dir + "/" + kind + "_a.cubin"));
    auto b = ParseCubin(ReadFile(dir + "/" + kind + "_b.cubin"));
    ASSERT_TRUE(a.ok()) << a.error();
    ASSERT_TRUE(b.ok()) << b.error();
    std::map<std::string, uint64_t> stable_b;
    for (const CubinVariable& v : b->variables) {
      EXPECT_TRUE(stable_b.emplace(StableSymbolName(v.name), v.size).second) << v.name;
    }
    size_t uniquified = 0, differing_names = 0;
    for (const CubinVariable& v : a->variables) {
      const std::string stable = StableSymbolName(v.name);
      auto it = stable_b.find(stable);
      ASSERT_NE(it, stable_b.end()) << v.name << " -> " << stable;
      EXPECT_EQ(it->second, v.size) << v.name;
      uniquified += HasCompileUniquifier(v.name);
      bool same_name = false;
      for (const CubinVariable& w : b->variables) same_name |= w.name == v.name;
      differing_names += !same_name;
    }
    EXPECT_EQ(a->variables.size(), b->variables.size());
    // The premise: the compiles really named these variables differently.
    EXPECT_GE(differing_names, 5u);
    EXPECT_EQ(uniquified, differing_names);
  }
}

}  // namespace
}  // namespace kerncap::cubin
