// ReplaySession on the fake CUDA driver (testing/fake_cuda.h): restore,
// launch, validate and bench run through the real session code against a
// simulated device, so the verdicts and the benchmark protocol are checked
// without a GPU.
#include "reproducer/replay/replay_session.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "reproducer/replay/replay_test_util.h"
#include "reproducer/replay/testing/elf_builder.h"
#include "reproducer/replay/testing/fake_cuda.h"

namespace kerncap::replay {
namespace {

using fake::FakeCuda;
using fake::Launch;

constexpr uint64_t kTableVa = 0x7f2a00000000;
constexpr uint64_t kDataVa = 0x7f2a00200000;
constexpr uint64_t kSpareVa = 0x7f2a00400000;  // a region add_one never touches
constexpr uint64_t kHostVa = 0x7f2b00001000;   // a small pinned host block
constexpr uint32_t kN = 1000;

// Real symbols of one unit compiled in two folders (nvcc 13.0): the capture
// names its variables the first way, the rebuilt code object the second.
constexpr char kScaleA[] =
    "_ZN30_INTERNAL_bd0d3510_4_k_cu_kern32_GLOBAL__N__bd0d3510_4_k_cu_kern7scale_vE";
constexpr char kScaleB[] =
    "_ZN30_INTERNAL_082a8982_4_k_cu_kern32_GLOBAL__N__082a8982_4_k_cu_kern7scale_vE";
constexpr char kCounterA[] = "__nv_static_21__bd0d3510_4_k_cu_kern_counter";
constexpr char kCounterB[] = "__nv_static_21__082a8982_4_k_cu_kern_counter";
constexpr char kAnonKernelA[] = "_ZN32_GLOBAL__N__bd0d3510_4_k_cu_kern11anon_kernelEPi";
constexpr char kAnonKernelB[] = "_ZN32_GLOBAL__N__082a8982_4_k_cu_kern11anon_kernelEPi";

constexpr uint64_t kOutVa = 0x7f2c00000000;
constexpr uint64_t kInVa = 0x7f2c00200000;
constexpr uint64_t kScaleVa = 0x7f2d00000000;
constexpr uint64_t kCounterVa = 0x7f2d00000100;
constexpr uint32_t kScaleN = 256;

// scale(float* out, const float* in, unsigned n): out[i] = scale_v * in[i];
// counter += n. It finds its module's variables under either compile's name.
double ScaleKernel(FakeCuda& cuda, const Launch& l) {
  uint64_t out = 0, in = 0;
  uint32_t n = 0;
  std::memcpy(&out, l.args.data(), 8);
  std::memcpy(&in, l.args.data() + 8, 8);
  std::memcpy(&n, l.args.data() + 16, 4);
  auto scale_at = cuda.GlobalOf(l, kScaleB);
  if (!scale_at) scale_at = cuda.GlobalOf(l, kScaleA);
  float scale = 0;
  if (scale_at) cuda.Read(*scale_at, &scale, 4);
  std::vector<float> v(n);
  if (!cuda.Read(in, v.data(), n * 4ull)) return -1;
  for (float& x : v) x *= scale;
  if (!cuda.Write(out, v.data(), n * 4ull)) return -1;
  auto counter_at = cuda.GlobalOf(l, kCounterB);
  if (!counter_at) counter_at = cuda.GlobalOf(l, kCounterA);
  if (counter_at) {
    uint32_t c = 0;
    cuda.Read(*counter_at, &c, 4);
    c += n;
    cuda.Write(*counter_at, &c, 4);
  }
  return 0.5;
}

std::string Bytes(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

class ReplaySessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeCuda::Get().Reset();
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("kc_replay_session_", ::getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // add_one over kN values; the post image says each gained `golden_delta`.
  v1::CaptureManifest AddOneCapture(testing::KcapBuilder& b, uint64_t golden_delta) {
    std::string table(8, '\0');
    std::memcpy(table.data(), &kDataVa, 8);
    std::string data(kN * 8, '\0'), post(kN * 8, '\0');
    for (uint64_t i = 0; i < kN; ++i) {
      const uint64_t v = i * 3 + 1, w = v + golden_delta;
      std::memcpy(data.data() + i * 8, &v, 8);
      std::memcpy(post.data() + i * 8, &w, 8);
    }
    v1::CaptureManifest m;
    m.set_capture_id("cap-fake");
    m.set_post_complete(true);
    m.mutable_kernel()->set_mangled_name("add_one");
    m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
    v1::Region* t = m.mutable_pre()->add_regions();
    t->set_va(kTableVa);
    t->set_kind(v1::REGION_DEVICE);
    *t->mutable_data() = b.Add(table);
    v1::Region* d = m.mutable_pre()->add_regions();
    d->set_va(kDataVa);
    d->set_kind(v1::REGION_DEVICE);
    *d->mutable_data() = b.Add(data);
    *m.mutable_post()->add_regions() = b.Diff(*t, table, table);
    *m.mutable_post()->add_regions() = b.Diff(*d, data, post);
    v1::CodeObject* c = m.add_code_objects();
    c->set_format(v1::CODE_OBJECT_PTX);
    c->set_name("add_one.ptx");
    *c->mutable_data() = b.Add(testing::kAddOnePtx);
    m.mutable_launch()->add_grid((kN + 255) / 256);
    m.mutable_launch()->add_block(256);
    std::string blob(12, '\0');
    std::memcpy(blob.data(), &kTableVa, 8);
    std::memcpy(blob.data() + 8, &kN, 4);
    m.set_argument_blob(blob);
    v1::Argument* a0 = m.add_arguments();
    a0->set_offset(0);
    a0->set_size(8);
    v1::Argument* a1 = m.add_arguments();
    a1->set_offset(8);
    a1->set_size(4);
    return m;
  }

  std::unique_ptr<CaptureSource> Write(testing::KcapBuilder& b, const v1::CaptureManifest& m) {
    const std::string path = Path("c.kcap");
    EXPECT_TRUE(b.Write(path, m).ok());
    auto src = CaptureSource::OpenKcap(path);
    EXPECT_TRUE(src.ok()) << src.status();
    return src.ok() ? std::move(*src) : nullptr;
  }

  std::filesystem::path dir_;
};

TEST_F(ReplaySessionTest, TheFakeDriverReplaysAndValidatesAddOne) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, AddOneCapture(b, 1));
  ASSERT_NE(src, nullptr);
  auto s = ReplaySession::Create(src.get(), SessionOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  auto r = (*s)->Validate(CompareOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed()) << FormatValidation(*r);
  EXPECT_EQ(r->regions.size(), 2u);
  EXPECT_FALSE(r->info.relocated);
}

class InternalLinkageTest : public ReplaySessionTest {
 protected:
  // The captured cubin (compile A), with `kernel` and its two variables.
  static std::string CubinA(const std::string& kernel = "scale") {
    testing::ElfSpec a;
    a.variables = {{kScaleA, 4}, {kCounterA, 4}};
    a.kernels = {kernel};
    return testing::BuildTestCubin(a);
  }

  // scale over kScaleN floats; the capture says scale_v was 3 and counter 10
  // (neither their initial values: a replay that does not restore them
  // computes something else). `counter_after`: what the post image says.
  v1::CaptureManifest ScaleCapture(testing::KcapBuilder& b, uint32_t counter_after,
                                   const std::string& kernel = "scale") {
    std::vector<float> in(kScaleN), out(kScaleN, -1.0f), post(kScaleN);
    for (uint32_t i = 0; i < kScaleN; ++i) {
      in[i] = static_cast<float>(i) + 0.5f;
      post[i] = 3.0f * in[i];
    }
    const float scale = 3.0f;
    const uint32_t counter = 10;
    v1::CaptureManifest m;
    m.set_capture_id("cap-internal");
    m.set_post_complete(true);
    m.mutable_kernel()->set_mangled_name(kernel);
    m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
    auto add = [&](uint64_t va, v1::RegionKind kind, const std::string& name,
                   const std::string& pre, const std::string& after) {
      v1::Region* r = m.mutable_pre()->add_regions();
      r->set_va(va);
      r->set_kind(kind);
      r->set_name(name);
      *r->mutable_data() = b.Add(pre);
      *m.mutable_post()->add_regions() = b.Diff(*r, pre, after);
    };
    add(kOutVa, v1::REGION_DEVICE, "", Bytes(out.data(), kScaleN * 4),
        Bytes(post.data(), kScaleN * 4));
    add(kInVa, v1::REGION_DEVICE, "", Bytes(in.data(), kScaleN * 4), Bytes(in.data(), kScaleN * 4));
    add(kScaleVa, v1::REGION_MODULE_GLOBAL, kScaleA, Bytes(&scale, 4), Bytes(&scale, 4));
    add(kCounterVa, v1::REGION_MODULE_GLOBAL, kCounterA, Bytes(&counter, 4),
        Bytes(&counter_after, 4));
    v1::CodeObject* c = m.add_code_objects();
    c->set_format(v1::CODE_OBJECT_CUBIN);
    c->set_name("k.cubin");
    *c->mutable_data() = b.Add(CubinA(kernel));
    m.mutable_launch()->add_grid(1);
    m.mutable_launch()->add_block(kScaleN);
    std::string blob(20, '\0');
    std::memcpy(blob.data(), &kOutVa, 8);
    std::memcpy(blob.data() + 8, &kInVa, 8);
    std::memcpy(blob.data() + 16, &kScaleN, 4);
    m.set_argument_blob(blob);
    for (uint32_t off : {0u, 8u, 16u}) {
      v1::Argument* a = m.add_arguments();
      a->set_offset(off);
      a->set_size(off == 16 ? 4 : 8);
    }
    return m;
  }

  // The rebuilt code object (compile B) in a file.
  std::string WriteVariant(std::vector<testing::ElfVariable> variables,
                           const std::string& kernel = "scale") {
    testing::ElfSpec spec;
    spec.variables = std::move(variables);
    spec.kernels = {kernel};
    spec.code = "rebuilt";
    const std::string path = Path("rebuilt.cubin");
    std::ofstream(path, std::ios::binary) << testing::BuildTestCubin(spec);
    return path;
  }

  absl::StatusOr<ValidationReport> ValidateWith(const CaptureSource* src,
                                                const std::string& code_object) {
    SessionOptions o;
    o.code_object_path = code_object;
    auto s = ReplaySession::Create(src, o);
    if (!s.ok()) return s.status();
    return (*s)->Validate(CompareOptions{});
  }

  void SetUp() override {
    ReplaySessionTest::SetUp();
    FakeCuda::Get().SetKernel("scale", ScaleKernel);
    FakeCuda::Get().SetKernel(kAnonKernelA, ScaleKernel);
    FakeCuda::Get().SetKernel(kAnonKernelB, ScaleKernel);
  }
};

// `make recompile` of the unit from another folder renames its internal
// variables; they are still restored (so the kernel computes with the
// captured scale) and compared (the counter's post-state is checked).
TEST_F(InternalLinkageTest, ARecompiledUnitsInternalVariablesAreRestoredAndCompared) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, ScaleCapture(b, 10 + kScaleN));
  ASSERT_NE(src, nullptr);
  auto r = ValidateWith(src.get(), WriteVariant({{kScaleB, 4}, {kCounterB, 4}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->verdict(), "pass") << FormatValidation(*r);
  EXPECT_TRUE(r->not_compared.empty());
  ASSERT_EQ(r->regions.size(), 4u);
  EXPECT_EQ(r->regions[2].name, kScaleA);
  EXPECT_EQ(r->regions[3].name, kCounterA);
  EXPECT_EQ(r->regions[3].kind, "module_global");
  // Said where the user looks: which variable matched which.
  bool said = false;
  for (const std::string& w : r->info.warnings) said |= absl::StrContains(w, kCounterB);
  EXPECT_TRUE(said);
}

TEST_F(InternalLinkageTest, AWrongValueInARenamedVariableFailsNamingIt) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, ScaleCapture(b, 10 + kScaleN + 1));  // the post image disagrees
  ASSERT_NE(src, nullptr);
  auto r = ValidateWith(src.get(), WriteVariant({{kScaleB, 4}, {kCounterB, 4}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->verdict(), "fail");
  ASSERT_EQ(r->failing(), 1u) << FormatValidation(*r);
  for (const RegionResult& rr : r->regions) {
    if (!rr.passed) {
      EXPECT_EQ(rr.name, kCounterA);
    }
  }
  EXPECT_TRUE(absl::StrContains(FormatValidation(*r), absl::StrCat("module_global ", kCounterA)));
}

// A variable the rebuilt code object does not have, or has twice under one
// identity, is not compared: the verdict is "incomplete", naming it, never
// "pass".
TEST_F(InternalLinkageTest, AVariableThatCannotBeMatchedMakesTheVerdictIncomplete) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, ScaleCapture(b, 10 + kScaleN));
  ASSERT_NE(src, nullptr);
  const std::string twin =
      "__nv_static_18__77777777_4_j_cu_x_counter";  // another unit's static counter
  for (const auto& vars : std::vector<std::vector<testing::ElfVariable>>{
           {{kScaleB, 4}}, {{kScaleB, 4}, {kCounterB, 4}, {twin, 4}}, {{kScaleB, 4}, {kCounterB, 8}}}) {
    SCOPED_TRACE(vars.size());
    auto r = ValidateWith(src.get(), WriteVariant(vars));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_STREQ(r->verdict(), "incomplete") << FormatValidation(*r);
    EXPECT_FALSE(r->passed());
    ASSERT_EQ(r->not_compared.size(), 1u);
    EXPECT_EQ(r->not_compared[0].name, kCounterA);
    EXPECT_EQ(r->not_compared[0].index, 3u);
    EXPECT_EQ(ValidationJson(*r)["result"], "incomplete");
  }
}

TEST_F(InternalLinkageTest, AnAnonymousNamespaceKernelIsFoundUnderItsNewName) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, ScaleCapture(b, 10 + kScaleN, kAnonKernelA));
  ASSERT_NE(src, nullptr);
  auto r = ValidateWith(src.get(), WriteVariant({{kScaleB, 4}, {kCounterB, 4}}, kAnonKernelB));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed()) << FormatValidation(*r);
  bool launched = false;
  for (const std::string& l : FakeCuda::Get().launches()) launched |= absl::StartsWith(l, kAnonKernelB);
  EXPECT_TRUE(launched);
}

// The post image holds a region the pre image does not: nothing restored it,
// so nothing can say whether the kernel wrote it right.
TEST_F(ReplaySessionTest, APostImageRegionWithoutAPreImageRegionIsNotAPass) {
  testing::KcapBuilder b(4096);
  v1::CaptureManifest m = AddOneCapture(b, 1);
  v1::Region* extra = m.mutable_post()->add_regions();
  extra->set_va(0x7f2e00000000);
  extra->set_kind(v1::REGION_DEVICE);
  *extra->mutable_data() = b.Add(std::string(64, '\x01'));
  auto src = Write(b, m);
  ASSERT_NE(src, nullptr);
  auto s = ReplaySession::Create(src.get(), SessionOptions{});
  ASSERT_TRUE(s.ok());
  auto r = (*s)->Validate(CompareOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->verdict(), "incomplete") << FormatValidation(*r);
  ASSERT_EQ(r->not_compared.size(), 1u);
  EXPECT_TRUE(r->not_compared[0].post_only);
  EXPECT_EQ(r->not_compared[0].va, 0x7f2e00000000u);
}

// A post region of another size would be compared against zeros (or not at
// all) past the shorter one: refused as not comparable.
TEST_F(ReplaySessionTest, APostImageOfAnotherShapeIsNotCompared) {
  testing::KcapBuilder b(4096);
  v1::CaptureManifest m = AddOneCapture(b, 1);
  v1::Region* post = m.mutable_post()->mutable_regions(1);
  post->clear_changed_chunks();
  post->set_diff(false);
  *post->mutable_data() = b.Add(std::string(kN * 8 / 2, '\x01'));
  auto src = Write(b, m);
  ASSERT_NE(src, nullptr);
  auto s = ReplaySession::Create(src.get(), SessionOptions{});
  ASSERT_TRUE(s.ok());
  auto r = (*s)->Validate(CompareOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->verdict(), "incomplete") << FormatValidation(*r);
  ASSERT_EQ(r->not_compared.size(), 1u);
  EXPECT_EQ(r->not_compared[0].index, 1u);
  EXPECT_TRUE(absl::StrContains(r->not_compared[0].reason, "another shape"));
}

}  // namespace
}  // namespace kerncap::replay
