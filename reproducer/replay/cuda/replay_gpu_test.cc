// GPU test of the replay session alone (no agent, no daemon): a synthetic
// capture of an in-place kernel, given as PTX, replayed at its original
// addresses, with forced relocation, and against a wrong golden image; a
// capture of a kernel whose module variables have internal linkage,
// replayed with the same unit compiled in another folder (real nvcc cubins,
// embedded); the benchmark's L2 protocol and its revalidation; validate's
// device path against the host path (DeviceCompareGpuTest).
// Skips without libcuda.so.1 or a device.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cuda/cubin_elf.h"
#include "common/cuda/symbol_identity.h"
#include "gtest/gtest.h"
#include "reproducer/replay/cuda/ncu_profile.h"
#include "reproducer/replay/cuda/replay_session.h"
#include "reproducer/replay/core/replay_test_util.h"

#ifdef KERNCAP_HAVE_INTERNAL_CUBINS
// common/cuda/testdata/internal_linkage.cu from two folders (embedded at build time).
namespace kerncap::replay::serve {
#define KC_DECLARE_CUBIN(v)                          \
  extern const unsigned char kCubin_##v[];           \
  extern const unsigned long long kCubin_##v##Size;
KC_DECLARE_CUBIN(internal_a)
KC_DECLARE_CUBIN(internal_b)
KC_DECLARE_CUBIN(internal_rdc_a)
KC_DECLARE_CUBIN(internal_rdc_b)
#undef KC_DECLARE_CUBIN
}  // namespace kerncap::replay::serve
#endif

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

// add_one that counts its launches in a module variable of its own (not in
// the capture, so nothing restores it) and adds 2 instead of 1 from its third
// launch on: correct when validated first, wrong during and after a timing.
constexpr char kLateCorruptingPtx[] = R"(
.version 7.8
.target sm_90
.address_size 64
.global .align 4 .u32 kc_launches;
.visible .entry add_one(.param .u64 table, .param .u32 n)
{
  .reg .pred %p<4>;
  .reg .b32 %r<9>;
  .reg .b64 %rd<9>;
  ld.param.u64 %rd1, [table];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra DONE;
  ld.volatile.global.u32 %r6, [kc_launches];
  cvta.to.global.u64 %rd2, %rd1;
  ld.global.u64 %rd3, [%rd2];
  cvta.to.global.u64 %rd4, %rd3;
  mul.wide.u32 %rd5, %r5, 8;
  add.s64 %rd6, %rd4, %rd5;
  ld.global.u64 %rd7, [%rd6];
  mov.u64 %rd8, 1;
  setp.ge.u32 %p2, %r6, 2;
  @%p2 mov.u64 %rd8, 2;
  add.s64 %rd7, %rd7, %rd8;
  st.global.u64 [%rd6], %rd7;
  setp.ne.u32 %p3, %r5, 0;
  @%p3 bra DONE;
  atom.global.add.u32 %r7, [kc_launches], 1;
DONE:
  ret;
}
)";

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
  // element gained (1 is right). `host_va`: also a 256-byte pinned host
  // block there, which nothing points to.
  void WriteCapture(uint64_t golden_delta, uint64_t host_va = 0) {
    testing::KcapBuilder b(64 << 10);
    testing::AddOneCaptureSpec spec;
    spec.capture_id = "cap-gpu-selftest";
    spec.code_name = "selftest.ptx";
    spec.table_va = kTableVa;
    spec.data_va = kDataVa;
    spec.n = kN;
    spec.golden_delta = golden_delta;
    v1::CaptureManifest m = testing::AddOneCapture(b, spec);
    if (host_va != 0) {
      v1::Region* h = m.mutable_pre()->add_regions();
      h->set_va(host_va);
      h->set_kind(v1::REGION_HOST_PINNED);
      *h->mutable_data() = b.Add(std::string(256, '\x5a'));
    }
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

// Launch overrides on the GPU (core/launch_override.h): add_one is one
// thread per element, so a launch that still covers the n elements passes,
// one that does not is launch-shape dependent (the captured code object
// fails there too and passes at the captured launch), and a candidate that
// is wrong at a covering launch fails.
TEST_F(ReplayGpuTest, LaunchOverridesValidateOrAreLaunchShapeDependent) {
  WriteCapture(1);
  auto validate = [&](LaunchOverride o, const std::string& code = "")
      -> absl::StatusOr<ValidationReport> {
    auto src = CaptureSource::OpenKcap(path_);
    if (!src.ok()) return src.status();
    SessionOptions so;
    so.launch = o;
    so.code_object_path = code;
    auto s = ReplaySession::Create(src->get(), so);
    if (!s.ok()) return s.status();
    return (*s)->Validate(CompareOptions{});
  };
  LaunchOverride covering;
  covering.block = Dim3{128, 1, 1};
  covering.grid = Dim3{(kN + 127) / 128, 1, 1};
  covering.cache_preference = CachePreference::kL1;
  auto r = validate(covering);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->verdict(), "pass") << FormatValidation(*r);
  LaunchOverride big = covering;
  big.block = Dim3{1024, 1, 1};
  big.grid = Dim3{(kN + 1023) / 1024, 1, 1};
  big.shared_mem_bytes = 64 << 10;          // above the 48 KiB default:
  big.max_dynamic_shared_mem = 64 << 10;    // needs the attribute
  r = validate(big);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->verdict(), "pass") << FormatValidation(*r);
  LaunchOverride cluster;
  cluster.cluster = Dim3{2, 1, 1};
  cluster.grid = Dim3{(kN + 255) / 256 + 1, 1, 1};  // even, covering
  r = validate(cluster);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->verdict(), "pass") << FormatValidation(*r);
  LaunchOverride short_grid;
  short_grid.grid = Dim3{10, 1, 1};  // 2560 of the 100000 elements
  r = validate(short_grid);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->verdict(), "launch_shape_dependent") << FormatValidation(*r);
  EXPECT_EQ(r->shape_probe["captured_code_at_captured_launch"], "pass");
  // A wrong candidate (adds 2) at a covering launch is a plain fail.
  std::string wrong = testing::kAddOnePtx;
  const size_t at = wrong.find("add.s64 %rd7, %rd7, 1;");
  ASSERT_NE(at, std::string::npos);
  wrong.replace(at, std::strlen("add.s64 %rd7, %rd7, 1;"), "add.s64 %rd7, %rd7, 2;");
  const std::string code = path_ + ".ptx";
  std::ofstream(code, std::ios::binary) << wrong;
  r = validate(covering, code);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->verdict(), "fail") << FormatValidation(*r);
  EXPECT_EQ(r->shape_probe["captured_code_at_override"], "pass");
  // Out of range: refused before anything runs.
  LaunchOverride too_big;
  too_big.block = Dim3{2048, 1, 1};
  EXPECT_EQ(validate(too_big).status().code(), absl::StatusCode::kInvalidArgument);
}

// kerncap-replay profile with the real ncu (skips without one, or without
// counter access: exit 77). Runs $KERNCAP_BUILD_DIR/bin/kerncap-replay.
TEST_F(ReplayGpuTest, ProfileShowsRealCounters) {
  const char* build = std::getenv("KERNCAP_BUILD_DIR");
  const std::string replay = absl::StrCat(build != nullptr ? build : ".", "/bin/kerncap-replay");
  if (::access(replay.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << replay;
  if (!FindNcu("").has_value()) GTEST_SKIP() << "no ncu (Nsight Compute) on this machine";
  WriteCapture(1);
  auto r = RunProcess({replay, "profile", path_, "--json"}, 300);
  ASSERT_TRUE(r.ok()) << r.status();
  if (r->exit_code == 77) GTEST_SKIP() << "profile skipped: " << r->err;
  ASSERT_EQ(r->exit_code, 0) << r->err << r->out;
  nlohmann::json j = nlohmann::json::parse(r->out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r->out;
  std::fprintf(stderr, "profile: %s\n", j.dump().c_str());
  EXPECT_EQ(j["kernel"], "add_one");
  ASSERT_TRUE(j["duration_us"].is_number()) << j.dump();
  EXPECT_GT(j["duration_us"].get<double>(), 0.0);
  EXPECT_TRUE(j["achieved_occupancy_pct"].is_number()) << j.dump();
  EXPECT_TRUE(j["dram_throughput_pct"].is_number()) << j.dump();
  EXPECT_TRUE(j["sm_sol_pct"].is_number()) << j.dump();
  EXPECT_TRUE(j["memory_sol_pct"].is_number()) << j.dump();
  // add_one moves 1.6 MB and does no floating point: memory-bound or no FLOPs.
  EXPECT_TRUE(j["roofline"]["dram_bytes"].is_number()) << j.dump();
  // With an override: the profiled launch is the overridden one.
  auto o = RunProcess({replay, "profile", path_, "--json", "--block=128",
                       absl::StrCat("--grid=", (kN + 127) / 128)}, 300);
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->exit_code, 0) << o->err;
  nlohmann::json k = nlohmann::json::parse(o->out, nullptr, false);
  EXPECT_EQ(k["block"], "(128, 1, 1)") << o->out;
}

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

// The persisting-L2 limit a previous user of the context set: the timing
// runs with none set aside, the report says what it found, and the limit is
// the caller's again afterwards.
TEST_F(ReplayGpuTest, BenchResetsAPersistingL2LimitSetBeforeIt) {
  WriteCapture(1);
  auto src = CaptureSource::OpenKcap(path_);
  ASSERT_TRUE(src.ok());
  auto s = ReplaySession::Create(src->get(), SessionOptions{});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Prepare().ok());
  const CudaDriver& cu = **CudaDriver::Get();
  ASSERT_EQ(cu.cuCtxSetCurrent((*s)->context()), CUDA_SUCCESS);
  const CUresult set = cu.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 4 << 20);
  if (set != CUDA_SUCCESS) GTEST_SKIP() << "no persisting L2 here: " << cu.ErrorText(set);
  size_t before = 0;
  ASSERT_EQ(cu.cuCtxGetLimit(&before, CU_LIMIT_PERSISTING_L2_CACHE_SIZE), CUDA_SUCCESS);
  ASSERT_GT(before, 0u);
  BenchOptions bo;
  bo.warmup = 2;
  bo.iterations = 10;
  bo.cold_l2 = true;
  auto r = (*s)->Bench(bo);
  ASSERT_TRUE(r.ok()) << r.status();
  std::fprintf(stderr, "%s", FormatBench(*r).c_str());
  EXPECT_TRUE(r->persisting_l2.supported);
  EXPECT_EQ(r->persisting_l2.limit_before, before);
  EXPECT_EQ(r->persisting_l2.limit_during, 0u);
  EXPECT_TRUE(r->persisting_l2.lines_reset);
  EXPECT_TRUE(r->persisting_l2.window_cleared);
  EXPECT_GE(r->l2_flush_bytes, 64u << 20);
  size_t after = 0;
  ASSERT_EQ(cu.cuCtxGetLimit(&after, CU_LIMIT_PERSISTING_L2_CACHE_SIZE), CUDA_SUCCESS);
  EXPECT_EQ(after, before);
  EXPECT_STREQ(r->kernel_before->verdict(), "pass");
  EXPECT_STREQ(r->kernel_after->verdict(), "pass");
}

// A variant that is right on its first launch and wrong from its third on
// (it counts launches in a variable of its own): validated before the timing
// it passes; the revalidation after the timing fails, on the data region,
// and blames the variant, not the captured binary.
TEST_F(ReplayGpuTest, RevalidationCatchesAVariantThatGoesWrongOnLaterLaunches) {
  WriteCapture(1);
  ValidationReport after;
  auto r = BenchAgainstOriginal(kLateCorruptingPtx, 10, &after);
  ASSERT_TRUE(r.ok()) << r.status();
  std::fprintf(stderr, "%s", FormatBench(*r).c_str());
  ASSERT_TRUE(r->kernel_before.has_value() && r->kernel_after.has_value());
  EXPECT_STREQ(r->kernel_before->verdict(), "pass");
  EXPECT_STREQ(r->kernel_after->verdict(), "fail");
  ASSERT_EQ(r->kernel_after->failing(), 1u);
  EXPECT_EQ(r->kernel_after->regions[1].passed, false);  // the data
  EXPECT_STREQ(r->original_before->verdict(), "pass");
  EXPECT_STREQ(r->original_after->verdict(), "pass");
  EXPECT_FALSE(r->verdicts_pass());
  EXPECT_EQ(BenchJson(*r, false)["revalidated"]["kernel"], "fail");
}

// A small pinned host block whose address is taken here, and that nothing
// points to: moved, said as a note, not as a relocated replay.
TEST_F(ReplayGpuTest, ASmallUnreferencedPinnedBlockThatMovedIsANote) {
  constexpr uint64_t kHostVa = 0x7f2b00001000;
  void* want = reinterpret_cast<void*>(kHostVa & ~uint64_t{4095});
  void* blocker = ::mmap(want, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                         -1, 0);
  if (blocker != want) {
    if (blocker != MAP_FAILED) ::munmap(blocker, 4096);
    GTEST_SKIP() << "the test's host address is taken here";
  }
  WriteCapture(1, kHostVa);
  auto r = Validate(false);
  ::munmap(blocker, 4096);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string text = FormatValidation(*r);
  std::fprintf(stderr, "%s", text.c_str());
  EXPECT_TRUE(r->passed());
  bool host_moved = false;
  for (const MovedRegion& m : r->info.moved) {
    if (m.region == 2) {
      host_moved = true;
      EXPECT_EQ(m.kind, "host_pinned");
      EXPECT_EQ(m.pointers_patched, 0u);
    }
  }
  EXPECT_TRUE(host_moved);
  if (r->info.moved.size() == 1) {  // the device ranges got their addresses
    EXPECT_EQ(r->info.relocation(), RelocationSeverity::kNote);
    EXPECT_TRUE(absl::StrContains(text, "note: 1 small pinned host block(s)")) << text;
    EXPECT_FALSE(absl::StrContains(text, "RELOCATED REPLAY")) << text;
  }
}

#ifdef KERNCAP_HAVE_INTERNAL_CUBINS
std::string Embedded(const unsigned char* p, unsigned long long n) {
  return std::string(reinterpret_cast<const char*>(p), n);
}

// internal_kernel(out, n) of common/cuda/testdata/internal_linkage.cu,
// captured with compile A's module variables set to values of the test's
// choosing, replayed with compile B (another folder: every internal
// variable has another name).
class InternalLinkageGpuTest : public ReplayGpuTest {
 protected:
  static constexpr uint64_t kOutVa = 0x7f2c00000000;
  static constexpr uint64_t kVarsVa = 0x7f2d00000000;
  static constexpr uint32_t kN = 128;

  // Writes the capture of `cubin_a`; `counter_delta`: what the post image
  // says the counter gained (kN is right).
  void WriteInternalCapture(const std::string& cubin_a, uint32_t counter_delta) {
    auto info = cubin::ParseCubin(cubin_a);
    ASSERT_TRUE(info.ok()) << info.error();
    testing::KcapBuilder b(4096);
    v1::CaptureManifest m;
    m.set_capture_id("cap-gpu-internal");
    m.set_post_complete(true);
    m.mutable_kernel()->set_mangled_name("internal_kernel");
    m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
    const float scale = 3.0f, tmpl = 1.0f;
    const int mode[4] = {2, 3, 4, 5}, versioned[2] = {0, 7};
    float coef[8];
    for (int k = 0; k < 8; ++k) coef[k] = 0.25f * static_cast<float>(k);
    const double nested[3] = {0.5, 0, 0};
    std::vector<float> out(kN, -1.0f), expected(kN);
    for (uint32_t i = 0; i < kN; ++i) {
      double t = static_cast<double>(scale * static_cast<float>(mode[i & 3]) + coef[i & 7]);
      t += nested[0];
      t += static_cast<double>(tmpl);
      t += versioned[1];
      expected[i] = static_cast<float>(t);
    }
    auto bytes = [](const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); };
    auto add = [&](uint64_t va, v1::RegionKind kind, const std::string& name,
                   const std::string& pre, const std::string& post) {
      v1::Region* r = m.mutable_pre()->add_regions();
      r->set_va(va);
      r->set_kind(kind);
      r->set_name(name);
      *r->mutable_data() = b.Add(pre);
      *m.mutable_post()->add_regions() = b.Diff(*r, pre, post);
    };
    add(kOutVa, v1::REGION_DEVICE, "", bytes(out.data(), kN * 4), bytes(expected.data(), kN * 4));
    uint64_t va = kVarsVa;
    for (const cubin::CubinVariable& v : info->variables) {
      std::string pre(v.size, '\0');
      auto set = [&](const void* p, size_t n) { std::memcpy(pre.data(), p, std::min<size_t>(n, v.size)); };
      std::string post;
      if (absl::StrContains(v.name, "scale_v")) set(&scale, 4);
      if (absl::StrContains(v.name, "mode_c")) set(mode, sizeof(mode));
      if (absl::StrContains(v.name, "coef_c")) set(coef, sizeof(coef));
      if (absl::StrContains(v.name, "tmpl_v")) set(&tmpl, 4);
      if (absl::StrContains(v.name, "nested")) set(nested, sizeof(nested));
      if (absl::StrContains(v.name, "versioned")) set(versioned, sizeof(versioned));
      post = pre;
      if (absl::StrContains(v.name, "counter")) {
        const uint32_t c = 10, c_after = 10 + counter_delta;
        set(&c, 4);
        post = pre;
        std::memcpy(post.data(), &c_after, 4);
      }
      if (absl::StrContains(v.name, "plain_global")) {
        const int p = 100, p_after = 101;
        set(&p, 4);
        post = pre;
        std::memcpy(post.data(), &p_after, 4);
      }
      add(va, v.constant ? v1::REGION_CONSTANT : v1::REGION_MODULE_GLOBAL, v.name, pre, post);
      va += 0x100;
    }
    v1::CodeObject* c = m.add_code_objects();
    c->set_format(v1::CODE_OBJECT_CUBIN);
    c->set_name("k.cubin");
    *c->mutable_data() = b.Add(cubin_a);
    m.mutable_launch()->add_grid(1);
    m.mutable_launch()->add_block(kN);
    testing::SetPointerAndCountArguments(m, kOutVa, kN);
    ASSERT_TRUE(b.Write(path_, m).ok());
    variables_ = info->variables.size();
  }

  absl::StatusOr<ValidationReport> ValidateWith(const std::string& cubin_b) {
    const std::string code = path_ + ".cubin";
    std::ofstream(code, std::ios::binary) << cubin_b;
    auto src = CaptureSource::OpenKcap(path_);
    if (!src.ok()) return src.status();
    SessionOptions o;
    o.code_object_path = code;
    auto s = ReplaySession::Create(src->get(), o);
    if (!s.ok()) return s.status();
    auto r = (*s)->Validate(CompareOptions{});
    std::filesystem::remove(code);
    return r;
  }
  size_t variables_ = 0;
};

TEST_F(InternalLinkageGpuTest, ARecompileFromAnotherFolderValidatesWithItsVariablesCompared) {
  const std::pair<std::string, std::string> builds[] = {
      {Embedded(serve::kCubin_internal_a, serve::kCubin_internal_aSize),
       Embedded(serve::kCubin_internal_b, serve::kCubin_internal_bSize)},
      {Embedded(serve::kCubin_internal_rdc_a, serve::kCubin_internal_rdc_aSize),
       Embedded(serve::kCubin_internal_rdc_b, serve::kCubin_internal_rdc_bSize)}};
  for (const auto& [a, b] : builds) {
    WriteInternalCapture(a, kN);
    ASSERT_GE(variables_, 7u);
    auto r = ValidateWith(b);
    ASSERT_TRUE(r.ok()) << r.status();
    std::fprintf(stderr, "%s", FormatValidation(*r).c_str());
    EXPECT_STREQ(r->verdict(), "pass") << FormatValidation(*r);
    EXPECT_TRUE(r->not_compared.empty());
    EXPECT_EQ(r->regions.size(), 1 + variables_);  // every variable compared
    size_t renamed = 0;
    for (const RegionResult& rr : r->regions) renamed += cubin::HasCompileUniquifier(rr.name);
    EXPECT_GE(renamed, 5u);
  }
}

TEST_F(InternalLinkageGpuTest, AWrongValueInARenamedVariableFailsNamingIt) {
  WriteInternalCapture(Embedded(serve::kCubin_internal_rdc_a, serve::kCubin_internal_rdc_aSize),
                       kN + 1);
  auto r = ValidateWith(Embedded(serve::kCubin_internal_rdc_b, serve::kCubin_internal_rdc_bSize));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->verdict(), "fail");
  ASSERT_EQ(r->failing(), 1u) << FormatValidation(*r);
  for (const RegionResult& rr : r->regions) {
    if (!rr.passed) {
      EXPECT_TRUE(absl::StrContains(rr.name, "counter")) << rr.name;
    }
  }
}
#endif  // KERNCAP_HAVE_INTERNAL_CUBINS

}  // namespace
}  // namespace kerncap::replay

namespace kerncap::replay {
namespace {

// validate's device path (device_expectation.h) on the GPU: a capture with
// 96 MiB of device state (above --compare-on=auto's 64 MiB) validates bitwise
// through both paths with the same verdict; a chunk the post image says is
// unchanged but the kernel writes, and a wrong value in a changed chunk,
// fail alike on both; with no device memory to spare it falls back.
class DeviceCompareGpuTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kBigTableVa = 0x7f3a00000000;
  static constexpr uint64_t kBigDataVa = 0x7f3a00200000;   // kBigN u64 values (32 MiB)
  static constexpr uint64_t kBigSpareVa = 0x7f3c00000000;  // 64 MiB the kernel never touches
  static constexpr uint32_t kBigN = 4u << 20;
  static constexpr uint64_t kChunk = 1u << 20;

  void SetUp() override {
    auto drv = CudaDriver::Get();
    if (!drv.ok()) GTEST_SKIP() << "no GPU: " << drv.status().message();
    int n = 0;
    if ((*drv)->cuInit(0) != CUDA_SUCCESS || (*drv)->cuDeviceGetCount(&n) != CUDA_SUCCESS ||
        n == 0) {
      GTEST_SKIP() << "no GPU";
    }
    path_ = (std::filesystem::temp_directory_path() /
             absl::StrCat("kc_replay_devcmp_", ::getpid(), ".kcap")).string();
  }
  void TearDown() override {
    if (!path_.empty()) std::filesystem::remove(path_);
    ::unsetenv("KERNCAP_REPLAY_COMPARE_MARGIN_MIB");
  }

  // inject: 0 a faithful post image; 1 chunk 3 of the data listed as
  // unchanged (the kernel writes it); 2 one wrong value in chunk 5.
  void Write(int inject) {
    testing::KcapBuilder b(kChunk);
    std::string table(8, '\0');
    std::memcpy(table.data(), &kBigDataVa, 8);
    std::string data(uint64_t{kBigN} * 8, '\0'), post(uint64_t{kBigN} * 8, '\0');
    for (uint64_t i = 0; i < kBigN; ++i) {
      const uint64_t v = i * 7 + 3, w = v + 1;
      std::memcpy(data.data() + i * 8, &v, 8);
      std::memcpy(post.data() + i * 8, &w, 8);
    }
    if (inject == 1) std::memcpy(post.data() + 3 * kChunk, data.data() + 3 * kChunk, kChunk);
    if (inject == 2) post[5 * kChunk + 7 * 8] ^= 0x10;
    const std::string spare(64u << 20, '\x5a');
    v1::CaptureManifest m;
    m.set_capture_id("cap-gpu-devcmp");
    m.set_post_complete(true);
    m.mutable_kernel()->set_mangled_name("add_one");
    m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
    auto add = [&](uint64_t va, const std::string& bytes) {
      v1::Region* r = m.mutable_pre()->add_regions();
      r->set_va(va);
      r->set_kind(v1::REGION_DEVICE);
      *r->mutable_data() = b.Add(bytes);
      return r;
    };
    v1::Region* t = add(kBigTableVa, table);
    v1::Region* d = add(kBigDataVa, data);
    add(kBigSpareVa, spare);
    *m.mutable_post()->add_regions() = b.Diff(*t, table, table);
    *m.mutable_post()->add_regions() = b.Diff(*d, data, post);
    v1::CodeObject* c = m.add_code_objects();
    c->set_format(v1::CODE_OBJECT_PTX);
    c->set_name("selftest.ptx");
    *c->mutable_data() = b.Add(testing::kAddOnePtx);
    m.mutable_launch()->add_grid(kBigN / 256);
    m.mutable_launch()->add_block(256);
    std::string blob(12, '\0');
    std::memcpy(blob.data(), &kBigTableVa, 8);
    std::memcpy(blob.data() + 8, &kBigN, 4);
    m.set_argument_blob(blob);
    for (uint32_t off : {0u, 8u}) {
      v1::Argument* a = m.add_arguments();
      a->set_offset(off);
      a->set_size(off == 0 ? 8 : 4);
    }
    ASSERT_TRUE(b.Write(path_, m).ok());
  }

  absl::StatusOr<ValidationReport> Validate(ComparePlace place) {
    auto src = CaptureSource::OpenKcap(path_);
    if (!src.ok()) return src.status();
    auto s = ReplaySession::Create(src->get(), SessionOptions{});
    if (!s.ok()) return s.status();
    CompareOptions o;
    o.place = place;
    return (*s)->Validate(o);
  }

  static void ExpectSame(const ValidationReport& h, const ValidationReport& d) {
    EXPECT_STREQ(h.verdict(), d.verdict());
    ASSERT_EQ(h.regions.size(), d.regions.size());
    for (size_t i = 0; i < h.regions.size(); ++i) {
      SCOPED_TRACE(absl::StrCat("region ", i));
      const CompareStats& a = h.regions[i].stats;
      const CompareStats& b = d.regions[i].stats;
      EXPECT_EQ(h.regions[i].passed, d.regions[i].passed);
      EXPECT_EQ(a.bytes_compared, b.bytes_compared);
      EXPECT_EQ(a.bytes_differing, b.bytes_differing);
      EXPECT_EQ(a.elements_differing, b.elements_differing);
      EXPECT_EQ(a.elements_failing, b.elements_failing);
      EXPECT_EQ(a.first_diff_offset, b.first_diff_offset);
      EXPECT_EQ(a.first_fail_offset, b.first_fail_offset);
      EXPECT_EQ(a.samples.size(), b.samples.size());
    }
  }

  std::string path_;
};

TEST_F(DeviceCompareGpuTest, BothPathsPassAFaithfulCaptureBitExactly) {
  Write(0);
  auto host = Validate(ComparePlace::kHost);
  auto device = Validate(ComparePlace::kAuto);
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_TRUE(host->passed()) << FormatValidation(*host);
  EXPECT_TRUE(device->passed()) << FormatValidation(*device);
  EXPECT_EQ(host->comparison.path, "host");
  EXPECT_EQ(device->comparison.path, "device") << device->comparison.host_reason;
  EXPECT_EQ(device->comparison.rechecked_bytes, 0u);
  EXPECT_EQ(device->comparison.golden_upload_bytes, uint64_t{kBigN} * 8);
  ExpectSame(*host, *device);
  std::printf("96 MiB: host path compare %.3f s, device path compare %.3f s (expected image "
              "%.3f s)\n", host->comparison.compare_seconds, device->comparison.compare_seconds,
              device->comparison.expectation_seconds);
}

TEST_F(DeviceCompareGpuTest, AKernelWriteIntoAnUnchangedChunkFailsOnBothPaths) {
  Write(1);
  auto host = Validate(ComparePlace::kHost);
  auto device = Validate(ComparePlace::kDevice);
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_STREQ(device->verdict(), "fail");
  EXPECT_EQ(device->comparison.path, "device");
  EXPECT_EQ(device->regions[1].stats.first_diff_offset, static_cast<int64_t>(3 * kChunk));
  EXPECT_GE(device->regions[1].stats.bytes_differing, kChunk / 8);  // every value's low byte
  EXPECT_EQ(device->comparison.rechecked_bytes, kChunk);
  ExpectSame(*host, *device);
}

TEST_F(DeviceCompareGpuTest, AWrongGoldenValueInAChangedChunkFailsOnBothPaths) {
  Write(2);
  auto host = Validate(ComparePlace::kHost);
  auto device = Validate(ComparePlace::kDevice);
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_STREQ(device->verdict(), "fail");
  EXPECT_EQ(device->regions[1].stats.first_diff_offset, static_cast<int64_t>(5 * kChunk + 56));
  EXPECT_EQ(device->regions[1].stats.bytes_differing, 1u);
  EXPECT_EQ(device->comparison.rechecked_bytes, kChunk);
  ExpectSame(*host, *device);
}

TEST_F(DeviceCompareGpuTest, NoDeviceMemoryToSpareFallsBackToTheHost) {
  Write(1);
  ::setenv("KERNCAP_REPLAY_COMPARE_MARGIN_MIB", "100000000", 1);  // larger than any GPU
  auto r = Validate(ComparePlace::kDevice);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->comparison.path, "host");
  EXPECT_TRUE(absl::StrContains(r->comparison.host_reason, "does not fit"))
      << r->comparison.host_reason;
  EXPECT_STREQ(r->verdict(), "fail");
  EXPECT_EQ(r->regions[1].stats.first_diff_offset, static_cast<int64_t>(3 * kChunk));
}

}  // namespace
}  // namespace kerncap::replay
