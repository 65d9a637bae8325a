// GPU test of the replay session alone (no agent, no daemon): a synthetic
// capture of an in-place kernel, given as PTX, replayed at its original
// addresses, with forced relocation, and against a wrong golden image.
// Skips without libcuda.so.1 or a device.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "reproducer/replay/replay_session.h"
#include "reproducer/replay/replay_test_util.h"

namespace kerncap::replay {
namespace {

// The kernel: testing::kAddOnePtx (replay_test_util.h).
constexpr const char* kPtx = testing::kAddOnePtx;

// The same kernel, made slow: every thread first spins for 200000 clock
// cycles (clock64 reads cannot be optimized away), then does the same work.
// The spin goes right after the kernel's register declarations.
std::string SlowAddOnePtx() {
  std::string ptx = testing::kAddOnePtx;
  const std::string after = "  .reg .b64 %rd<8>;\n";
  const size_t at = ptx.find(after);
  if (at == std::string::npos) return "";  // the kernel changed: the test then fails to load it
  ptx.insert(at + after.size(),
             "  .reg .pred %spin_p;\n"
             "  .reg .b64 %spin_t<3>;\n"
             "  mov.u64 %spin_t0, %clock64;\n"
             "SPIN:\n"
             "  mov.u64 %spin_t1, %clock64;\n"
             "  sub.s64 %spin_t2, %spin_t1, %spin_t0;\n"
             "  setp.lt.s64 %spin_p, %spin_t2, 200000;\n"
             "  @%spin_p bra SPIN;\n");
  return ptx;
}

constexpr uint64_t kTableVa = 0x7f2a00000000;  // holds one pointer
constexpr uint64_t kDataVa = 0x7f2a00200000;   // n u64 values
constexpr uint32_t kN = 100000;

class ReplayGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto drv = CudaDriver::Get();
    if (!drv.ok()) GTEST_SKIP() << "no GPU: " << drv.status().message();
    CUresult r = (*drv)->cuInit(0);
    int n = 0;
    if (r != CUDA_SUCCESS || (*drv)->cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0) {
      GTEST_SKIP() << "no GPU: cuInit: " << (*drv)->ErrorText(r);
    }
    path_ = (std::filesystem::temp_directory_path() /
             absl::StrCat("kc_replay_gpu_", ::getpid(), ".kcap")).string();
  }
  void TearDown() override {
    if (!path_.empty()) std::filesystem::remove(path_);
    if (!path_.empty()) std::filesystem::remove(path_ + ".ptx");
  }

  // bench --compare-original with `variant_ptx` as the --code-object.
  absl::StatusOr<BenchReport> BenchAgainstOriginal(const char* variant_ptx, int iterations,
                                                   ValidationReport* after) {
    const std::string code = path_ + ".ptx";
    std::ofstream(code, std::ios::binary) << variant_ptx;
    auto src = CaptureSource::OpenKcap(path_);
    if (!src.ok()) return src.status();
    SessionOptions o;
    o.code_object_path = code;
    auto s = ReplaySession::Create(src->get(), o);
    if (!s.ok()) return s.status();
    BenchOptions bo;
    bo.warmup = 3;
    bo.iterations = iterations;
    bo.compare_original = true;
    auto r = (*s)->Bench(bo);
    if (!r.ok()) return r.status();
    // Every launch started from restored inputs: the memory now holds one
    // launch's result, whichever binary ran last.
    auto v = (*s)->CompareWithPostImage(CompareOptions{});
    if (!v.ok()) return v.status();
    *after = *v;
    return r;
  }

  // Writes the capture; `golden_delta` is what the post image says each
  // element gained (1 is right).
  void WriteCapture(uint64_t golden_delta) {
    testing::KcapBuilder b(64 << 10);
    std::string table(8, '\0');
    std::memcpy(table.data(), &kDataVa, 8);
    std::string data(kN * 8, '\0'), post(kN * 8, '\0');
    for (uint64_t i = 0; i < kN; ++i) {
      uint64_t v = i * 3, w = v + golden_delta;
      std::memcpy(data.data() + i * 8, &v, 8);
      std::memcpy(post.data() + i * 8, &w, 8);
    }
    v1::CaptureManifest m;
    m.set_capture_id("cap-gpu-selftest");
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
    c->set_name("selftest.ptx");
    *c->mutable_data() = b.Add(kPtx);
    m.mutable_launch()->add_grid((kN + 255) / 256);
    m.mutable_launch()->add_block(256);
    // Exactly the kernel's parameter size (8 + 4), as the agent records it.
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
    ASSERT_TRUE(b.Write(path_, m).ok());
  }

  absl::StatusOr<ValidationReport> Validate(bool force_relocation) {
    auto src = CaptureSource::OpenKcap(path_);
    if (!src.ok()) return src.status();
    SessionOptions o;
    o.force_relocation = force_relocation;
    auto s = ReplaySession::Create(src->get(), o);
    if (!s.ok()) return s.status();
    return (*s)->Validate(CompareOptions{});
  }

  std::string path_;
};

TEST_F(ReplayGpuTest, ValidatesAtOriginalAddresses) {
  WriteCapture(1);
  auto r = Validate(false);
  ASSERT_TRUE(r.ok()) << r.status();
  std::fprintf(stderr, "%s", FormatValidation(*r).c_str());
  EXPECT_TRUE(r->passed());
  EXPECT_EQ(r->regions.size(), 2u);
  if (r->info.relocated) {
    std::fprintf(stderr, "note: the driver did not honour the address hint here\n");
  } else {
    EXPECT_EQ(r->regions[1].replay_va, kDataVa);
  }
}

TEST_F(ReplayGpuTest, ForcedRelocationPatchesPointersAndStillValidates) {
  WriteCapture(1);
  auto r = Validate(true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->info.relocated);
  EXPECT_GE(r->info.patched_words, 2u);  // the argument and the stored pointer
  EXPECT_TRUE(r->passed()) << FormatValidation(*r);
}

TEST_F(ReplayGpuTest, WrongGoldenImageFails) {
  WriteCapture(2);
  auto r = Validate(false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->passed());
  // Bytes dtype: each differing byte fails. The replay computes v+1 where the
  // golden image says v+2: the low byte of every element differs, a higher
  // byte only where the carries differ (100391 bytes for kN = 100000).
  uint64_t differing = 0;
  for (uint64_t i = 0; i < kN; ++i) {
    const uint64_t got = i * 3 + 1, want = i * 3 + 2;
    for (int b = 0; b < 64; b += 8) differing += ((got >> b) & 0xff) != ((want >> b) & 0xff);
  }
  EXPECT_EQ(r->regions[1].stats.elements_failing, differing);
  EXPECT_EQ(r->regions[1].stats.bytes_differing, differing);
  EXPECT_EQ(r->regions[1].stats.first_diff_offset, 0);
}

TEST_F(ReplayGpuTest, BenchComparesASlowerVariantWithTheCapturedBinary) {
  WriteCapture(1);
  ValidationReport after;
  auto r = BenchAgainstOriginal(SlowAddOnePtx().c_str(), 20, &after);
  ASSERT_TRUE(r.ok()) << r.status();
  std::fprintf(stderr, "%s", FormatBench(*r).c_str());
  ASSERT_TRUE(r->compared);
  EXPECT_TRUE(r->restore_each);  // add_one writes its input
  EXPECT_EQ(r->samples_ms.size(), 20u);
  EXPECT_EQ(r->comparison.original_samples_ms.size(), 20u);
  EXPECT_EQ(r->comparison.order, "ABBA");
  EXPECT_GT(r->comparison.original_stats.median_ms, 0.0);
  EXPECT_GT(r->stats.median_ms, r->comparison.original_stats.median_ms);
  EXPECT_LT(r->comparison.speedup.speedup, 1.0);
  EXPECT_LT(r->comparison.speedup.pair_p90, 1.0);  // every pair, or nearly, says slower
  EXPECT_EQ(r->comparison.speedup.pairs, 20u);
  nlohmann::json j = BenchJson(*r, false);
  EXPECT_EQ(j["compare_original"], true);
  EXPECT_EQ(j["original"]["median_ms"], r->comparison.original_stats.median_ms);
  EXPECT_EQ(j["original"]["code_object"], "selftest.ptx");
  EXPECT_LT(j["speedup"].get<double>(), 1.0);
  EXPECT_TRUE(absl::StrContains(FormatBench(*r), "the variant is slower"));
  EXPECT_TRUE(after.passed()) << FormatValidation(after);
}

TEST_F(ReplayGpuTest, BenchOfTheCapturedBinaryAgainstItselfIsEven) {
  WriteCapture(1);
  ValidationReport after;
  auto r = BenchAgainstOriginal(kPtx, 50, &after);
  ASSERT_TRUE(r.ok()) << r.status();
  std::fprintf(stderr, "%s", FormatBench(*r).c_str());
  ASSERT_TRUE(r->compared);
  EXPECT_GT(r->comparison.speedup.speedup, 0.7);
  EXPECT_LT(r->comparison.speedup.speedup, 1.4);
  EXPECT_GT(r->comparison.speedup.pair_median, 0.7);
  EXPECT_LT(r->comparison.speedup.pair_median, 1.4);
  EXPECT_TRUE(after.passed()) << FormatValidation(after);
}

// tex_scale(cudaTextureObject_t tex, float* out, unsigned n): out[i] =
// 2 * tex1Dfetch(tex, i) + 1, the texture a linear float resource.
constexpr char kTexScalePtx[] = R"(
.version 7.8
.target sm_90
.address_size 64
.visible .entry tex_scale(.param .u64 tex, .param .u64 out, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .f32 %f<7>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [tex];
  ld.param.u64 %rd2, [out];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra DONE;
  tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [%rd1, {%r5}];
  fma.rn.f32 %f5, %f1, 0f40000000, 0f3F800000;
  cvta.to.global.u64 %rd3, %rd2;
  mul.wide.u32 %rd4, %r5, 4;
  add.s64 %rd5, %rd3, %rd4;
  st.global.f32 [%rd5], %f5;
DONE:
  ret;
}
)";

constexpr uint64_t kTexInVa = 0x7f2c00000000;   // the texture's memory
constexpr uint64_t kTexOutVa = 0x7f2c00400000;  // the output
constexpr uint32_t kTexN = 65536;
constexpr uint64_t kCapturedHandle = 0x77;  // meaningless in this process

class ReplayTextureGpuTest : public ReplayGpuTest {
 protected:
  // A capture of tex_scale; `texture_over` is where its recorded texture
  // object points (kTexInVa is right).
  void WriteTextureCapture(uint64_t texture_over) {
    testing::KcapBuilder b(64 << 10);
    std::string in(kTexN * 4, '\0'), out(kTexN * 4, '\0'), golden(kTexN * 4, '\0');
    for (uint32_t i = 0; i < kTexN; ++i) {
      const float v = static_cast<float>(i % 1000) * 0.25f, w = 2.0f * v + 1.0f;
      std::memcpy(in.data() + i * 4, &v, 4);
      std::memcpy(golden.data() + i * 4, &w, 4);
    }
    v1::CaptureManifest m;
    m.set_capture_id("cap-gpu-texture");
    m.set_post_complete(true);
    m.mutable_kernel()->set_mangled_name("tex_scale");
    m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
    v1::Region* ri = m.mutable_pre()->add_regions();
    ri->set_va(kTexInVa);
    ri->set_kind(v1::REGION_DEVICE);
    *ri->mutable_data() = b.Add(in);
    v1::Region* ro = m.mutable_pre()->add_regions();
    ro->set_va(kTexOutVa);
    ro->set_kind(v1::REGION_DEVICE);
    *ro->mutable_data() = b.Add(out);
    *m.mutable_post()->add_regions() = b.Diff(*ro, out, golden);
    v1::CodeObject* c = m.add_code_objects();
    c->set_format(v1::CODE_OBJECT_PTX);
    c->set_name("tex_scale.ptx");
    *c->mutable_data() = b.Add(kTexScalePtx);
    m.mutable_launch()->add_grid(kTexN / 256);
    m.mutable_launch()->add_block(256);
    std::string blob(20, '\0');
    std::memcpy(blob.data(), &kCapturedHandle, 8);
    std::memcpy(blob.data() + 8, &kTexOutVa, 8);
    std::memcpy(blob.data() + 16, &kTexN, 4);
    m.set_argument_blob(blob);
    for (uint32_t off : {0u, 8u, 16u}) {
      v1::Argument* a = m.add_arguments();
      a->set_offset(off);
      a->set_size(off == 16 ? 4 : 8);
    }
    v1::TextureObject* t = m.add_texture_objects();
    t->set_type(v1::TextureObject::TEXTURE_OBJECT);
    t->set_handle(kCapturedHandle);
    t->add_argument_offsets(0);
    v1::TextureResource* r = t->mutable_resource();
    r->set_type(v1::TextureResource::RESOURCE_LINEAR);
    r->set_device_ptr(texture_over);
    r->set_format(CU_AD_FORMAT_FLOAT);
    r->set_num_channels(1);
    r->set_size_bytes(kTexN * 4);
    for (int i = 0; i < 3; ++i) t->mutable_sampling()->add_address_mode(CU_TR_ADDRESS_MODE_CLAMP);
    ASSERT_TRUE(b.Write(path_, m).ok());
  }
};

TEST_F(ReplayTextureGpuTest, RecreatedTextureReadsTheRestoredMemory) {
  WriteTextureCapture(kTexInVa);
  auto r = Validate(false);
  ASSERT_TRUE(r.ok()) << r.status();
  std::fprintf(stderr, "%s", FormatValidation(*r).c_str());
  EXPECT_TRUE(r->passed()) << FormatValidation(*r);
  ASSERT_EQ(r->info.texture_objects.size(), 1u);
  EXPECT_EQ(r->info.texture_objects[0].captured_handle, kCapturedHandle);
  EXPECT_NE(r->info.texture_objects[0].replay_handle, 0u);
}

TEST_F(ReplayTextureGpuTest, RelocatedReplayPointsTheTextureAtTheMovedMemory) {
  WriteTextureCapture(kTexInVa);
  auto r = Validate(true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->info.relocated);
  ASSERT_EQ(r->info.texture_objects.size(), 1u);
  EXPECT_NE(r->info.texture_objects[0].replay_ptr, kTexInVa);
  EXPECT_TRUE(r->passed()) << FormatValidation(*r);
}

TEST_F(ReplayTextureGpuTest, ADescriptorOverOtherMemoryFailsValidation) {
  // The texture recorded over the (zero) output buffer: the kernel then
  // computes 2*0+1, not what the application computed. The recorded
  // descriptor is what decides what the kernel reads.
  WriteTextureCapture(kTexOutVa);
  auto r = Validate(false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->passed());
}

TEST_F(ReplayTextureGpuTest, BenchLaunchesWithTheRecreatedTexture) {
  WriteTextureCapture(kTexInVa);
  auto src = CaptureSource::OpenKcap(path_);
  ASSERT_TRUE(src.ok()) << src.status();
  auto s = ReplaySession::Create(src->get(), SessionOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  BenchOptions bo;
  bo.warmup = 2;
  bo.iterations = 10;
  auto b = (*s)->Bench(bo);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->samples_ms.size(), 10u);
  // After the timing loop the output is still what the texture reads give.
  auto v = (*s)->CompareWithPostImage(CompareOptions{});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->passed()) << FormatValidation(*v);
}

}  // namespace
}  // namespace kerncap::replay
