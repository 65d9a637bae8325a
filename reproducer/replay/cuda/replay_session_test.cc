// ReplaySession on the fake CUDA driver (testing/fake_cuda.h): restore,
// launch, validate and bench run through the real session code against a
// simulated device, so the verdicts and the benchmark protocol are checked
// without a GPU.
#include "reproducer/replay/cuda/replay_session.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "reproducer/replay/core/replay_test_util.h"
#include "reproducer/replay/testing/elf_builder.h"
#include "reproducer/replay/testing/fake_cuda.h"
#include "reproducer/replay/testing/internal_linkage_fixture.h"

namespace kerncap::replay {
namespace {

using fake::FakeCuda;
using fake::Launch;

constexpr uint64_t kTableVa = 0x7f2a00000000;
constexpr uint64_t kDataVa = 0x7f2a00200000;
constexpr uint64_t kSpareVa = 0x7f2a00400000;  // a region add_one never touches
constexpr uint64_t kHostVa = 0x7f2b00001000;   // a small pinned host block
constexpr uint32_t kN = 1000;

using testing::kAnonKernelA;
using testing::kAnonKernelB;
using testing::kCounterA;
using testing::kCounterB;
using testing::kScaleA;

// `kerncap-replay TAIL` on the fake driver (TAIL: arguments and the shell's
// redirections); its stdout appended to *out; its exit status, -1 if it
// could not run or was killed.
int RunReplayCli(const std::string& tail, std::string* out) {
  const std::string cmd =
      absl::StrCat("LD_LIBRARY_PATH='", KERNCAP_FAKE_CUDA_DIR, "' '", KERNCAP_REPLAY_BIN, "' ", tail);
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
using testing::kScaleB;
using testing::kScaleN;
using testing::ScaleKernel;


// A fresh session on `src` (options `o`), validated with the default
// tolerances: the session's creation error, else the validation's verdict.
absl::StatusOr<ValidationReport> ValidateOnce(const CaptureSource* src, SessionOptions o = {}) {
  auto s = ReplaySession::Create(src, o);
  if (!s.ok()) return s.status();
  return (*s)->Validate(CompareOptions{});
}

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
    testing::AddOneCaptureSpec spec;
    spec.capture_id = "cap-fake";
    spec.table_va = kTableVa;
    spec.data_va = kDataVa;
    spec.n = kN;
    spec.first = 1;
    spec.golden_delta = golden_delta;
    return testing::AddOneCapture(b, spec);
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
  auto r = ValidateOnce(src.get());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed()) << FormatValidation(*r);
  EXPECT_EQ(r->regions.size(), 2u);
  EXPECT_FALSE(r->info.relocated);
}

class InternalLinkageTest : public ReplaySessionTest {
 protected:
  v1::CaptureManifest ScaleCapture(testing::KcapBuilder& b, uint32_t counter_after,
                                   const std::string& kernel = "scale") {
    return testing::ScaleCapture(b, counter_after, kernel);
  }

  // The rebuilt code object (compile B) in a file.
  std::string WriteVariant(std::vector<testing::ElfVariable> variables,
                           const std::string& kernel = "scale") {
    const std::string path = Path("rebuilt.cubin");
    std::ofstream(path, std::ios::binary)
        << testing::ScaleCubin(std::move(variables), kernel, "rebuilt");
    return path;
  }

  absl::StatusOr<ValidationReport> ValidateWith(const CaptureSource* src,
                                                const std::string& code_object) {
    SessionOptions o;
    o.code_object_path = code_object;
    return ValidateOnce(src, o);
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

// A minimal unit (or any rebuilt unit) drops the module's variables its
// kernel does not use. One that the captured dispatch left unchanged and
// that no captured word points into cannot be reached by the loaded kernel:
// a note, and the verdict is complete. A pointer into it anywhere in the
// captured memory or the arguments makes it a gap again.
class AbsentVariableTest : public InternalLinkageTest {
 protected:
  static constexpr uint64_t kTableVa = testing::kCounterVarVa + 0x1000;

  // The scale capture plus an unchanged module table `kc_table`; with
  // `pointer_in` "spare" or "args", a pointer into the table there.
  std::unique_ptr<CaptureSource> Capture(testing::KcapBuilder& b, const std::string& pointer_in) {
    v1::CaptureManifest m = testing::ScaleCapture(b, 10 + kScaleN, "scale", /*spare=*/true);
    const std::string table(256, '\x5a');
    v1::Region* t = m.mutable_pre()->add_regions();
    t->set_va(kTableVa);
    t->set_kind(v1::REGION_MODULE_GLOBAL);
    t->set_name("kc_table");
    *t->mutable_data() = b.Add(table);
    const uint64_t into = kTableVa + 0x40;
    if (pointer_in == "spare") {
      std::string bytes(4096, '\x33');
      std::memcpy(bytes.data() + 512, &into, 8);
      *m.mutable_pre()->mutable_regions(4)->mutable_data() = b.Add(bytes);
    } else if (pointer_in == "args") {
      std::string blob = m.argument_blob();
      blob.resize(32, '\0');
      std::memcpy(blob.data() + 24, &into, 8);
      m.set_argument_blob(blob);
    }
    return Write(b, m);
  }
};

TEST_F(AbsentVariableTest, AnUnchangedTableNoPointerReachesIsANoteNotAGap) {
  testing::KcapBuilder b(4096);
  auto src = Capture(b, "");
  ASSERT_NE(src, nullptr);
  auto r = ValidateWith(src.get(), WriteVariant({{kScaleB, 4}, {kCounterB, 4}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->verdict(), "pass") << FormatValidation(*r);
  EXPECT_TRUE(r->not_compared.empty());
  ASSERT_EQ(r->unreachable.size(), 1u);
  EXPECT_EQ(r->unreachable[0].name, "kc_table");
  EXPECT_TRUE(absl::StrContains(FormatValidation(*r), "cannot reach them")) << FormatValidation(*r);
  EXPECT_EQ(ValidationJson(*r)["unreachable"][0]["name"], "kc_table");
}

TEST_F(AbsentVariableTest, APointerIntoItInCapturedMemoryOrTheArgumentsMakesItAGap) {
  for (const char* where : {"spare", "args"}) {
    SCOPED_TRACE(where);
    testing::KcapBuilder b(4096);
    auto src = Capture(b, where);
    ASSERT_NE(src, nullptr);
    auto r = ValidateWith(src.get(), WriteVariant({{kScaleB, 4}, {kCounterB, 4}}));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_STREQ(r->verdict(), "incomplete") << FormatValidation(*r);
    ASSERT_EQ(r->not_compared.size(), 1u);
    EXPECT_EQ(r->not_compared[0].name, "kc_table");
    EXPECT_TRUE(absl::StrContains(r->not_compared[0].reason, "1 captured word(s) point into it"))
        << r->not_compared[0].reason;
    EXPECT_TRUE(r->unreachable.empty());
  }
}

TEST_F(AbsentVariableTest, AVariableTheCapturedDispatchChangedIsAGapEvenUnreachable) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, ScaleCapture(b, 10 + kScaleN));  // the counter changes
  ASSERT_NE(src, nullptr);
  auto r = ValidateWith(src.get(), WriteVariant({{kScaleB, 4}}));  // no counter
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->verdict(), "incomplete") << FormatValidation(*r);
  ASSERT_EQ(r->not_compared.size(), 1u);
  EXPECT_TRUE(absl::StrContains(r->not_compared[0].reason, "the captured dispatch changed it"))
      << r->not_compared[0].reason;
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
  auto r = ValidateOnce(src.get());
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
  auto r = ValidateOnce(src.get());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->verdict(), "incomplete") << FormatValidation(*r);
  ASSERT_EQ(r->not_compared.size(), 1u);
  EXPECT_EQ(r->not_compared[0].index, 1u);
  EXPECT_TRUE(absl::StrContains(r->not_compared[0].reason, "another shape"));
}

}  // namespace
}  // namespace kerncap::replay

namespace kerncap::replay {
namespace {

class BenchTest : public ReplaySessionTest {
 protected:
  // add_one plus a device region it never touches (index 2).
  v1::CaptureManifest WithSpare(testing::KcapBuilder& b) {
    v1::CaptureManifest m = AddOneCapture(b, 1);
    const std::string spare(4096, '\x33');
    v1::Region* r = m.mutable_pre()->add_regions();
    r->set_va(kSpareVa);
    r->set_kind(v1::REGION_DEVICE);
    *r->mutable_data() = b.Add(spare);
    return m;
  }
  // A PTX file that the fake driver runs with `k` (the captured one keeps add_one).
  std::string Variant(const std::string& tag, fake::Kernel k) {
    const std::string ptx = std::string(testing::kAddOnePtx) + "// variant " + tag + "\n";
    const std::string path = Path(tag + ".ptx");
    std::ofstream(path, std::ios::binary) << ptx;
    FakeCuda::Get().SetKernelForImage(ptx, "add_one", std::move(k));
    return path;
  }
  absl::StatusOr<BenchReport> Bench(const CaptureSource* src, const BenchOptions& bo,
                                    const std::string& code_object = "") {
    SessionOptions o;
    o.code_object_path = code_object;
    auto s = ReplaySession::Create(src, o);
    if (!s.ok()) return s.status();
    session_ = std::move(*s);
    return session_->Bench(bo);
  }
  std::unique_ptr<ReplaySession> session_;
};

// Each timed launch: restore the inputs, flush L2 on the launch stream,
// then the event pair around the kernel alone; the persisting-L2 limit a
// previous user set is 0 while the timed launches run, and put back after.
TEST_F(BenchTest, TheTimedProtocolIsRestoreFlushThenEventsAroundTheKernelOnly) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, AddOneCapture(b, 1));
  ASSERT_NE(src, nullptr);
  FakeCuda& f = FakeCuda::Get();
  auto drv = CudaDriver::Get();
  ASSERT_TRUE(drv.ok());
  ASSERT_EQ((*drv)->cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 4 << 20), CUDA_SUCCESS);
  std::vector<uint64_t> limit_at_launch;
  f.SetKernel("add_one", [&](FakeCuda& cuda, const fake::Launch& l) {
    limit_at_launch.push_back(cuda.persisting_l2_limit());
    return fake::AddOneKernel()(cuda, l);
  });
  BenchOptions bo;
  bo.warmup = 2;
  bo.iterations = 5;
  bo.cold_l2 = true;
  auto r = Bench(src.get(), bo);
  ASSERT_TRUE(r.ok()) << r.status();
  // The flush (100 MiB at 0.25 ms/MiB of fake device time) and the restore
  // are outside the events: every sample is the kernel's 1 ms.
  ASSERT_EQ(r->samples_ms.size(), 5u);
  for (double ms : r->samples_ms) EXPECT_DOUBLE_EQ(ms, 1.0);
  EXPECT_EQ(r->l2_flush_bytes, 100u << 20);
  EXPECT_TRUE(absl::StrContains(r->protocol, "overwrite 104857600 bytes")) << r->protocol;
  // Persisting L2: reset for the timing (validation, 7 timed, revalidation).
  EXPECT_EQ(r->persisting_l2.limit_before, 4u << 20);
  EXPECT_EQ(r->persisting_l2.limit_during, 0u);
  EXPECT_TRUE(r->persisting_l2.lines_reset);
  EXPECT_TRUE(r->persisting_l2.window_cleared);
  ASSERT_EQ(limit_at_launch.size(), 9u);
  for (size_t i = 1; i < 8; ++i) EXPECT_EQ(limit_at_launch[i], 0u) << "launch " << i;
  EXPECT_EQ(f.persisting_l2_limit(), 4u << 20);  // the caller's setting, back
  // The order around every timed launch.
  const std::vector<std::string> log = f.log();
  std::vector<size_t> launches;
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i] == "launch add_one") launches.push_back(i);
  }
  ASSERT_EQ(launches.size(), 9u);
  size_t reset_at = 0;
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i] == "reset_persisting_l2") reset_at = i;
  }
  EXPECT_GT(reset_at, launches[0]);
  EXPECT_LT(reset_at, launches[1]);
  for (size_t k = 1; k < 8; ++k) {
    const size_t at = launches[k];
    SCOPED_TRACE(k);
    EXPECT_EQ(log[at - 1], "event");
    EXPECT_TRUE(absl::StartsWith(log[at - 2], "memset32 ")) << log[at - 2];
    EXPECT_TRUE(absl::EndsWith(log[at - 2], " 104857600")) << log[at - 2];
    EXPECT_TRUE(absl::StartsWith(log[at - 3], "htod ")) << log[at - 3];  // the restore
    EXPECT_EQ(log[at + 1], "event");
  }
  EXPECT_STREQ(r->kernel_before->verdict(), "pass");
  EXPECT_STREQ(r->kernel_after->verdict(), "pass");
  EXPECT_TRUE(r->verdicts_pass());
}

// A variant that passes its first launch and then writes a region the
// capture says the kernel never writes: the revalidation after the timing
// says so, blames that region and that binary, not the original.
TEST_F(BenchTest, RevalidationCatchesAVariantThatCorruptsStateOnlyOnLaterLaunches) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, WithSpare(b));
  ASSERT_NE(src, nullptr);
  const std::string variant = Variant("corrupting", [](FakeCuda& cuda, const fake::Launch& l) {
    const double ms = fake::AddOneKernel()(cuda, l);
    if (l.launches_of_function >= 2) cuda.WriteU64(kSpareVa + 64, 0xdeadbeef);
    return ms;
  });
  BenchOptions bo;
  bo.warmup = 1;
  bo.iterations = 4;
  bo.compare_original = true;
  auto r = Bench(src.get(), bo, variant);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->kernel_before.has_value());
  EXPECT_STREQ(r->kernel_before->verdict(), "pass");
  EXPECT_STREQ(r->kernel_after->verdict(), "fail") << FormatBench(*r);
  ASSERT_EQ(r->kernel_after->failing(), 1u);
  for (const RegionResult& rr : r->kernel_after->regions) {
    if (!rr.passed) {
      EXPECT_EQ(rr.index, 2u);
    }
  }
  ASSERT_EQ(r->changed_during_timing.size(), 1u);
  EXPECT_EQ(r->changed_during_timing[0].index, 2u);
  EXPECT_STREQ(r->original_before->verdict(), "pass");
  EXPECT_STREQ(r->original_after->verdict(), "pass");  // repaired before its turn
  EXPECT_FALSE(r->verdicts_pass());
  const nlohmann::json j = BenchJson(*r, false);
  EXPECT_EQ(j["validated"]["kernel"], "pass");
  EXPECT_EQ(j["revalidated"]["kernel"], "fail");
  EXPECT_EQ(j["revalidated"]["original"], "pass");
  EXPECT_TRUE(absl::StrContains(FormatBench(*r), "CHANGED DURING TIMING: region 2"));
}

TEST_F(BenchTest, RevalidationCatchesWrongOutputOnLaterLaunches) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, AddOneCapture(b, 1));
  ASSERT_NE(src, nullptr);
  const std::string variant = Variant("drifting", [](FakeCuda& cuda, const fake::Launch& l) {
    const double ms = fake::AddOneKernel()(cuda, l);
    if (l.launches_of_function >= 3) fake::AddOneKernel()(cuda, l);  // adds 2 from now on
    return ms;
  });
  BenchOptions bo;
  bo.warmup = 1;
  bo.iterations = 3;
  auto r = Bench(src.get(), bo, variant);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->kernel_before->verdict(), "pass");
  EXPECT_STREQ(r->kernel_after->verdict(), "fail");
  EXPECT_TRUE(r->changed_during_timing.empty());  // it wrote only what the kernel writes
}

// The same binary against itself: both sides measured the same way.
TEST_F(BenchTest, TwoIdenticalBinariesMeasureEven) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, AddOneCapture(b, 1));
  ASSERT_NE(src, nullptr);
  const std::string same = Path("same.ptx");
  std::ofstream(same, std::ios::binary) << testing::kAddOnePtx;
  BenchOptions bo;
  bo.warmup = 2;
  bo.iterations = 6;
  bo.cold_l2 = true;
  bo.compare_original = true;
  auto r = Bench(src.get(), bo, same);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->comparison.speedup.speedup, 1.0);
  EXPECT_DOUBLE_EQ(r->comparison.speedup.pair_p10, 1.0);
  EXPECT_DOUBLE_EQ(r->comparison.speedup.pair_p90, 1.0);
  EXPECT_TRUE(r->verdicts_pass());
}

// BenchOptions::variant_path (the C API's bench): a module loaded for the
// bench beside the session's, timed against the captured one, unloaded after.
TEST_F(BenchTest, AVariantFileIsLoadedForTheBenchAndUnloadedAfter) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, AddOneCapture(b, 1));
  ASSERT_NE(src, nullptr);
  const std::string slow = Variant("slow", [](FakeCuda& cuda, const fake::Launch& l) {
    fake::AddOneKernel()(cuda, l);
    return 2.0;
  });
  auto s = ReplaySession::Create(src.get(), SessionOptions{});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Prepare().ok());
  const size_t modules = FakeCuda::Get().loaded_modules();
  BenchOptions bo;
  bo.warmup = 1;
  bo.iterations = 4;
  bo.variant_path = slow;
  bo.compare_original = true;
  auto r = (*s)->Bench(bo);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->stats.median_ms, 2.0);
  EXPECT_DOUBLE_EQ(r->comparison.original_stats.median_ms, 1.0);
  EXPECT_DOUBLE_EQ(r->comparison.speedup.speedup, 0.5);
  EXPECT_EQ(r->comparison.variant, slow);
  // The captured one stays (a later bench compares against it again); the variant is gone.
  EXPECT_EQ(FakeCuda::Get().loaded_modules(), modules + 1);
  // The memory holds one launch's result, as after a launch.
  auto now = (*s)->CompareWithPostImage(CompareOptions{});
  ASSERT_TRUE(now.ok());
  EXPECT_TRUE(now->passed());
  ASSERT_TRUE((*s)->RestoreWrittenRegions().ok());
  auto again = (*s)->Validate(CompareOptions{});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->passed());
}

TEST_F(BenchTest, ADriverWithoutAPersistingL2LimitIsSaidNotFatal) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, AddOneCapture(b, 1));
  ASSERT_NE(src, nullptr);
  FakeCuda::Get().set_persisting_l2_supported(false);
  BenchOptions bo;
  bo.warmup = 0;
  bo.iterations = 2;
  auto r = Bench(src.get(), bo);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->persisting_l2.supported);
  EXPECT_TRUE(absl::StrContains(r->persisting_l2.note, "CUDA_ERROR_UNSUPPORTED_LIMIT"))
      << r->persisting_l2.note;
  EXPECT_EQ(BenchJson(*r, false)["persisting_l2"]["supported"], false);
}

class RelocationTest : public ReplaySessionTest {
 protected:
  void TearDown() override {
    if (blocker_ != nullptr) ::munmap(blocker_, 4096);
    ReplaySessionTest::TearDown();
  }
  // add_one plus a 256-byte pinned host block (index 2) that something else
  // already occupies here, so the replay must put it elsewhere.
  v1::CaptureManifest WithMovedHostBlock(testing::KcapBuilder& b, bool pointer_to_it) {
    v1::CaptureManifest m = AddOneCapture(b, 1);
    v1::Region* h = m.mutable_pre()->add_regions();
    h->set_va(kHostVa);
    h->set_kind(v1::REGION_HOST_PINNED);
    *h->mutable_data() = b.Add(std::string(256, '\x5a'));
    if (pointer_to_it) {
      std::string blob = m.argument_blob();
      blob.resize(24, '\0');
      std::memcpy(blob.data() + 16, &kHostVa, 8);
      m.set_argument_blob(blob);
      v1::Argument* a = m.add_arguments();
      a->set_offset(16);
      a->set_size(8);
    }
    return m;
  }
  bool BlockHostVa() {
    void* want = reinterpret_cast<void*>(kHostVa & ~uint64_t{4095});
    blocker_ = ::mmap(want, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                      -1, 0);
    if (blocker_ == MAP_FAILED || blocker_ != want) {
      if (blocker_ != MAP_FAILED) ::munmap(blocker_, 4096);
      blocker_ = nullptr;
      return false;
    }
    return true;
  }
  void* blocker_ = nullptr;
};

TEST_F(RelocationTest, ASmallPinnedBlockThatMovedWithNoPointerToItIsANote) {
  if (!BlockHostVa()) GTEST_SKIP() << "the test's host address is taken here";
  testing::KcapBuilder b(4096);
  auto src = Write(b, WithMovedHostBlock(b, false));
  ASSERT_NE(src, nullptr);
  auto r = ValidateOnce(src.get());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed()) << FormatValidation(*r);
  ASSERT_EQ(r->info.moved.size(), 1u);
  EXPECT_EQ(r->info.moved[0].region, 2u);
  EXPECT_EQ(r->info.moved[0].kind, "host_pinned");
  EXPECT_EQ(r->info.moved[0].old_va, kHostVa);
  EXPECT_NE(r->info.moved[0].new_va, kHostVa);
  EXPECT_EQ(r->info.moved[0].pointers_patched, 0u);
  EXPECT_EQ(r->info.relocation(), RelocationSeverity::kNote);
  const std::string text = FormatValidation(*r);
  EXPECT_TRUE(absl::StrContains(text, "note: 1 small pinned host block(s)")) << text;
  EXPECT_FALSE(absl::StrContains(text, "RELOCATED REPLAY")) << text;
  EXPECT_EQ(ValidationJson(*r)["relocation"], "note");
}

TEST_F(RelocationTest, APointerToAMovedBlockMakesItTheRelocationAlarm) {
  if (!BlockHostVa()) GTEST_SKIP() << "the test's host address is taken here";
  testing::KcapBuilder b(4096);
  auto src = Write(b, WithMovedHostBlock(b, true));
  ASSERT_NE(src, nullptr);
  auto r = ValidateOnce(src.get());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->info.moved.size(), 1u);
  EXPECT_EQ(r->info.moved[0].pointers_patched, 1u);  // the argument
  EXPECT_EQ(r->info.relocation(), RelocationSeverity::kRelocated);
  const std::string text = FormatValidation(*r);
  EXPECT_TRUE(absl::StrContains(text, "RELOCATED REPLAY: 1 region(s)")) << text;
  EXPECT_TRUE(absl::StrContains(text, "host_pinned region 2 0x7f2b00001000 +256 -> ")) << text;
  EXPECT_TRUE(absl::StrContains(text, "1 pointer word(s) into it patched")) << text;
}

// Device ranges the driver will not give: every moved region with the
// pointers found into it (the argument into the table, the table's word
// into the data).
TEST_F(RelocationTest, MovedDeviceRegionsCountThePointersIntoEach) {
  FakeCuda::Get().RefuseAddress(kTableVa, 64ull << 20);
  testing::KcapBuilder b(4096);
  auto src = Write(b, AddOneCapture(b, 1));
  ASSERT_NE(src, nullptr);
  auto r = ValidateOnce(src.get());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed()) << FormatValidation(*r);
  ASSERT_EQ(r->info.moved.size(), 2u);
  EXPECT_EQ(r->info.moved[0].region, 0u);
  EXPECT_EQ(r->info.moved[0].kind, "device");
  EXPECT_EQ(r->info.moved[0].pointers_patched, 1u);
  EXPECT_EQ(r->info.moved[1].region, 1u);
  EXPECT_EQ(r->info.moved[1].pointers_patched, 1u);
  EXPECT_EQ(r->info.relocation(), RelocationSeverity::kRelocated);
  const nlohmann::json j = ValidationJson(*r);
  EXPECT_EQ(j["moved_ranges"][1]["pointers_patched"], 1);
  EXPECT_EQ(j["relocation"], "relocated");
}


// kerncap-replay itself on the fake driver (LD_LIBRARY_PATH finds it as
// libcuda.so.1): a capture with a module variable its code object lacks
// validates as INCOMPLETE, exit code 1, in the text and the JSON.
TEST_F(ReplaySessionTest, TheCliSaysIncompleteAndExitsMismatch) {
  testing::KcapBuilder b(4096);
  v1::CaptureManifest m = AddOneCapture(b, 1);
  v1::Region* g = m.mutable_pre()->add_regions();
  g->set_va(0x7f2d00000400);
  g->set_kind(v1::REGION_MODULE_GLOBAL);
  g->set_name("kc_scale");  // not in add_one's PTX
  *g->mutable_data() = b.Add(std::string("\x00\x00\x80\x3f", 4));
  // The captured dispatch changed it: the loaded code cannot have done that,
  // so it is a gap (an unchanged one nothing points into would be a note).
  *m.mutable_post()->add_regions() =
      b.Diff(*g, std::string("\x00\x00\x80\x3f", 4), std::string("\x00\x00\x00\x40", 4));
  const std::string kcap = Path("c.kcap");
  ASSERT_TRUE(b.Write(kcap, m).ok());
  auto run = [&](const std::string& args, std::string* out) {
    return RunReplayCli(absl::StrCat(args, " '", kcap, "' 2>/dev/null"), out);
  };
  std::string text, json;
  EXPECT_EQ(run("validate", &text), 8) << text;  // docs/EXIT_CODES.md: no pass
  EXPECT_TRUE(absl::StrContains(text, "NOT COMPARED captured region 2")) << text;
  EXPECT_TRUE(absl::StrContains(text, "INCOMPLETE: 2 regions compared, 0 differ, 1 not compared"))
      << text;
  EXPECT_EQ(run("validate --json", &json), 8) << json;
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << json;
  EXPECT_EQ(j["result"], "incomplete");
  EXPECT_EQ(j["not_compared"][0]["name"], "kc_scale");
  // Bench times it, but its verdicts are incomplete: exit 8 too.
  std::string bench;
  EXPECT_EQ(run("bench --iterations=2 --warmup=0 --json", &bench), 8) << bench;
  const nlohmann::json bj = nlohmann::json::parse(bench, nullptr, false);
  ASSERT_FALSE(bj.is_discarded()) << bench;
  EXPECT_EQ(bj["validated"]["kernel"], "incomplete");
  EXPECT_EQ(bj["verdicts_pass"], false);
  EXPECT_EQ(bj["iterations"], 2);
}

}  // namespace
}  // namespace kerncap::replay

namespace kerncap::replay {
namespace {

// Launch-configuration overrides (core/launch_override.h) on the fake driver.
class LaunchOverrideTest : public ReplaySessionTest {
 protected:
  // add_one written as one thread per element: it adds 1 only to elements
  // below grid*block, so its output depends on the launch shape.
  static fake::Kernel PerThreadAddOne(std::vector<std::string>* shapes, uint64_t delta = 1) {
    return [shapes, delta](FakeCuda& cuda, const fake::Launch& l) -> double {
      if (shapes != nullptr) {
        shapes->push_back(absl::StrCat(l.grid[0], "x", l.block[0], " smem ", l.shared_bytes));
      }
      uint64_t table = 0;
      uint32_t n = 0;
      std::memcpy(&table, l.args.data(), 8);
      std::memcpy(&n, l.args.data() + 8, 4);
      auto data = cuda.ReadU64(table);
      if (!data) return -1;
      const uint64_t threads = uint64_t{l.grid[0]} * l.block[0];
      for (uint64_t i = 0; i < n && i < threads; ++i) {
        auto v = cuda.ReadU64(*data + i * 8);
        if (!v || !cuda.WriteU64(*data + i * 8, *v + delta)) return -1;
      }
      return 1.0;
    };
  }
  std::string Variant(const std::string& tag, fake::Kernel k) {
    const std::string ptx = std::string(testing::kAddOnePtx) + "// variant " + tag + "\n";
    const std::string path = Path(tag + ".ptx");
    std::ofstream(path, std::ios::binary) << ptx;
    FakeCuda::Get().SetKernelForImage(ptx, "add_one", std::move(k));
    return path;
  }
  absl::StatusOr<ValidationReport> ValidateWith(const CaptureSource* src, LaunchOverride o,
                                                const std::string& code_object = "") {
    SessionOptions so;
    so.launch = o;
    so.code_object_path = code_object;
    auto s = ReplaySession::Create(src, so);
    if (!s.ok()) return s.status();
    session_ = std::move(*s);
    return session_->Validate(CompareOptions{});
  }
  std::unique_ptr<ReplaySession> session_;
};

TEST_F(LaunchOverrideTest, TheOverriddenLaunchRunsAndValidates) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, AddOneCapture(b, 1));  // captured: 4 x 256
  ASSERT_NE(src, nullptr);
  std::vector<std::string> shapes;
  FakeCuda::Get().SetKernel("add_one", PerThreadAddOne(&shapes));
  LaunchOverride o;
  o.grid = Dim3{8, 1, 1};
  o.block = Dim3{128, 1, 1};
  o.shared_mem_bytes = 1024;
  o.cache_preference = CachePreference::kL1;
  auto r = ValidateWith(src.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->verdict(), "pass") << FormatValidation(*r);
  ASSERT_EQ(shapes.size(), 1u);
  EXPECT_EQ(shapes[0], "8x128 smem 1024");
  EXPECT_EQ(r->info.launch_override, "grid=(8,1,1) block=(128,1,1) smem=1024");
  EXPECT_TRUE(r->shape_probe.is_null());  // passed: nothing to probe
  EXPECT_EQ(ValidationJson(*r)["launch_override"]["cache_preference"], "l1");
  bool cache_set = false;
  for (const std::string& line : FakeCuda::Get().log()) {
    cache_set |= absl::StartsWith(line, "cache_config add_one " +
                                            std::to_string(int{CU_FUNC_CACHE_PREFER_L1}));
  }
  EXPECT_TRUE(cache_set);
}

TEST_F(LaunchOverrideTest, AShapeTheCapturedCodeAlsoFailsAtIsLaunchShapeDependent) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, AddOneCapture(b, 1));
  ASSERT_NE(src, nullptr);
  std::vector<std::string> shapes;
  FakeCuda::Get().SetKernel("add_one", PerThreadAddOne(&shapes));
  LaunchOverride o;
  o.grid = Dim3{2, 1, 1};  // 512 threads for 1000 elements
  auto r = ValidateWith(src.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->verdict(), "launch_shape_dependent") << FormatValidation(*r);
  EXPECT_FALSE(r->passed());
  EXPECT_EQ(r->shape_probe["captured_code_at_override"], "fail");
  EXPECT_EQ(r->shape_probe["captured_code_at_captured_launch"], "pass");
  // The override's launch, then the captured launch as the probe.
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0], "2x256 smem 0");
  EXPECT_EQ(shapes[1], "4x256 smem 0");
  EXPECT_TRUE(absl::StrContains(FormatValidation(*r), "LAUNCH-SHAPE DEPENDENT"));
}

TEST_F(LaunchOverrideTest, AWrongCandidateAtAShapeTheCapturedCodePassesIsAFail) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, AddOneCapture(b, 1));
  ASSERT_NE(src, nullptr);
  FakeCuda::Get().SetKernel("add_one", PerThreadAddOne(nullptr));
  const std::string wrong = Variant("adds_two", PerThreadAddOne(nullptr, 2));
  LaunchOverride o;
  o.grid = Dim3{8, 1, 1};
  o.block = Dim3{128, 1, 1};
  auto r = ValidateWith(src.get(), o, wrong);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->verdict(), "fail") << FormatValidation(*r);
  EXPECT_EQ(r->shape_probe["captured_code_at_override"], "pass");
  // The same candidate at a shape the captured code fails at too: the
  // captured outputs cannot judge it.
  o.grid = Dim3{2, 1, 1};
  o.block = Dim3{256, 1, 1};
  auto d = ValidateWith(src.get(), o, wrong);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_STREQ(d->verdict(), "launch_shape_dependent") << FormatValidation(*d);
}

// bench --compare-original with an override: the variant runs at the
// overridden launch, the captured code object at the captured one (the
// baseline a tuned launch must beat).
TEST_F(LaunchOverrideTest, BenchTimesTheOriginalAtTheCapturedLaunch) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, AddOneCapture(b, 1));
  ASSERT_NE(src, nullptr);
  std::vector<std::string> shapes;
  FakeCuda::Get().SetKernel("add_one", PerThreadAddOne(&shapes));
  SessionOptions so;
  so.launch.grid = Dim3{8, 1, 1};
  so.launch.block = Dim3{128, 1, 1};
  auto s = ReplaySession::Create(src.get(), so);
  ASSERT_TRUE(s.ok()) << s.status();
  BenchOptions bo;
  bo.warmup = 0;
  bo.iterations = 2;
  bo.compare_original = true;
  auto r = (*s)->Bench(bo);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->verdicts_pass()) << FormatBench(*r);
  size_t overridden = 0, captured = 0;
  for (const std::string& sh : shapes) {
    overridden += sh == "8x128 smem 0";
    captured += sh == "4x256 smem 0";
  }
  // Prepare's validation-free launches aside: 2 validations + 2 timed each.
  EXPECT_EQ(overridden, 4u) << absl::StrJoin(shapes, " ");
  EXPECT_EQ(captured, 4u) << absl::StrJoin(shapes, " ");
}

TEST_F(LaunchOverrideTest, OutOfRangeOverridesAreRefusedBeforeAnyLaunch) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, AddOneCapture(b, 1));
  ASSERT_NE(src, nullptr);
  LaunchOverride o;
  o.block = Dim3{2048, 1, 1};
  auto r = ValidateWith(src.get(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(FakeCuda::Get().launches().empty());
}

TEST_F(LaunchOverrideTest, TheCliTakesOverrideFlags) {
  testing::KcapBuilder b(4096);
  const std::string kcap = Path("c.kcap");
  ASSERT_TRUE(b.Write(kcap, AddOneCapture(b, 1)).ok());
  const std::string out = Path("out.json");
  const std::string cmd = absl::StrCat("LD_LIBRARY_PATH=", KERNCAP_FAKE_CUDA_DIR, " ",
                                       KERNCAP_REPLAY_BIN, " validate ", kcap,
                                       " --grid=8 --block=128,1,1 --json > ", out);
  const int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 0);
  std::ifstream in(out);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["result"], "pass");
  EXPECT_EQ(j["platform"], "cuda");
  EXPECT_EQ(j["launch"], "grid=(8,1,1) block=(128,1,1) smem=0");
  // A malformed dimension is a usage-level error naming the flag.
  const int bad = std::system(absl::StrCat("LD_LIBRARY_PATH=", KERNCAP_FAKE_CUDA_DIR, " ",
                                           KERNCAP_REPLAY_BIN, " validate ", kcap,
                                           " --grid=0 2> ", Path("err.txt"))
                                  .c_str());
  EXPECT_NE(WEXITSTATUS(bad), 0);
  std::ifstream err(Path("err.txt"));
  std::string msg((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(absl::StrContains(msg, "--grid")) << msg;
}

// `kerncap-replay profile` with stand-in ncu scripts: the argv it gets (the
// captured kernel, `run` of the same capture with the same overrides), the
// figures read back, and the two skips (no ncu, no counter access).
TEST_F(LaunchOverrideTest, ProfileRunsNcuOnTheReplayAndSkipsWithoutIt) {
  testing::KcapBuilder b(4096);
  const std::string kcap = Path("c.kcap");
  ASSERT_TRUE(b.Write(kcap, AddOneCapture(b, 1)).ok());
  const std::string argv_file = Path("ncu_argv.txt");
  const std::string ncu = Path("ncu");
  {
    std::ofstream f(ncu);
    f << "#!/bin/sh\n"
      << "echo \"$@\" > '" << argv_file << "'\n"
      << "while [ $# -gt 0 ] && [ \"$1\" != run ]; do last=\"$1\"; shift; done\n"
      << "\"$last\" \"$@\" || exit 9\n"
      << "echo '\"ID\",\"Kernel Name\",\"Grid Size\",\"Block Size\",\"gpu__time_duration.sum\","
         "\"sm__warps_active.avg.pct_of_peak_sustained_active\"'\n"
      << "echo '\"\",\"\",\"\",\"\",\"nsecond\",\"%\"'\n"
      << "echo '\"0\",\"add_one\",\"(2, 1, 1)\",\"(256, 1, 1)\",\"2,500\",\"61.5\"'\n";
  }
  std::filesystem::permissions(ncu, std::filesystem::perms::owner_all);
  auto run = [&](const std::string& args, std::string* out) {
    return RunReplayCli(absl::StrCat("profile '", kcap, "' ", args, " 2>/dev/null"), out);
  };
  std::string json;
  ASSERT_EQ(run("--ncu=" + ncu + " --grid=2 --json", &json), 0) << json;
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << json;
  EXPECT_DOUBLE_EQ(j["duration_us"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(j["achieved_occupancy_pct"].get<double>(), 61.5);
  EXPECT_TRUE(j["dram_throughput_pct"].is_null());
  EXPECT_EQ(j["capture_id"], "cap-fake");
  std::ifstream in(argv_file);
  std::string argv((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(absl::StrContains(argv, "--kernel-name add_one")) << argv;
  EXPECT_TRUE(absl::StrContains(argv, " run " + kcap)) << argv;
  EXPECT_TRUE(absl::StrContains(argv, "--grid=2")) << argv;
  std::string text;
  EXPECT_EQ(run("--ncu=" + ncu, &text), 0) << text;
  EXPECT_TRUE(absl::StrContains(text, "achieved occupancy (%)")) << text;
  // No ncu: skipped (77), with the reason.
  std::string skipped;
  EXPECT_EQ(run("--ncu=/nonexistent/ncu --json", &skipped), 77) << skipped;
  EXPECT_EQ(nlohmann::json::parse(skipped, nullptr, false)["skipped"], true) << skipped;
  // No counter access: skipped too.
  const std::string denied = Path("ncu_denied");
  std::ofstream(denied) << "#!/bin/sh\necho '==ERROR== ERR_NVGPUCTRPERM - The user does not have "
                           "permission' >&2\nexit 1\n";
  std::filesystem::permissions(denied, std::filesystem::perms::owner_all);
  std::string perm;
  EXPECT_EQ(run("--ncu=" + denied + " --json", &perm), 77) << perm;
  EXPECT_TRUE(absl::StrContains(perm, "ERR_NVGPUCTRPERM")) << perm;
}

}  // namespace
}  // namespace kerncap::replay

namespace kerncap::replay {
namespace {

// validate's device path (device_expectation.h) on the fake driver: the
// comparison kernel is the fake's built-in (bitwise). The verdict must be
// the host path's, field for field, whatever the path.
class DeviceCompareTest : public ReplaySessionTest {
 protected:
  // add_one (golden: each value + golden_delta) plus a device region it
  // never touches (index 2, unchanged in the post image).
  v1::CaptureManifest WithSpare(testing::KcapBuilder& b, uint64_t golden_delta) {
    v1::CaptureManifest m = AddOneCapture(b, golden_delta);
    const std::string spare(3 * 4096, '\x33');
    v1::Region* r = m.mutable_pre()->add_regions();
    r->set_va(kSpareVa);
    r->set_kind(v1::REGION_DEVICE);
    *r->mutable_data() = b.Add(spare);
    return m;
  }
  absl::StatusOr<ValidationReport> Validate(const CaptureSource* src, CompareOptions o,
                                            ComparePlace place, SessionOptions so = {}) {
    o.place = place;
    auto s = ReplaySession::Create(src, so);
    if (!s.ok()) return s.status();
    return (*s)->Validate(o);
  }
  static size_t CompareLaunches() {
    size_t n = 0;
    for (const std::string& l : FakeCuda::Get().launches()) {
      n += absl::StartsWith(l, KC_COMPARE_KERNEL_NAME);
    }
    return n;
  }
  // Everything a verdict says, but where it was compared.
  static void ExpectSameVerdict(const ValidationReport& host, const ValidationReport& device) {
    EXPECT_STREQ(host.verdict(), device.verdict());
    ASSERT_EQ(host.regions.size(), device.regions.size());
    for (size_t i = 0; i < host.regions.size(); ++i) {
      const RegionResult& h = host.regions[i];
      const RegionResult& d = device.regions[i];
      SCOPED_TRACE(absl::StrCat("region ", h.index));
      EXPECT_EQ(h.index, d.index);
      EXPECT_EQ(h.passed, d.passed);
      EXPECT_EQ(h.stats.bytes_compared, d.stats.bytes_compared);
      EXPECT_EQ(h.stats.bytes_differing, d.stats.bytes_differing);
      EXPECT_EQ(h.stats.elements_compared, d.stats.elements_compared);
      EXPECT_EQ(h.stats.elements_differing, d.stats.elements_differing);
      EXPECT_EQ(h.stats.elements_failing, d.stats.elements_failing);
      EXPECT_EQ(h.stats.max_abs_error, d.stats.max_abs_error);
      EXPECT_EQ(h.stats.max_ulp_error, d.stats.max_ulp_error);
      EXPECT_EQ(h.stats.first_diff_offset, d.stats.first_diff_offset);
      EXPECT_EQ(h.stats.first_fail_offset, d.stats.first_fail_offset);
      ASSERT_EQ(h.stats.samples.size(), d.stats.samples.size());
      for (size_t k = 0; k < h.stats.samples.size(); ++k) {
        EXPECT_EQ(h.stats.samples[k].offset, d.stats.samples[k].offset);
        EXPECT_EQ(h.stats.samples[k].expected, d.stats.samples[k].expected);
        EXPECT_EQ(h.stats.samples[k].actual, d.stats.samples[k].actual);
      }
    }
    EXPECT_EQ(host.not_compared.size(), device.not_compared.size());
  }
};

TEST_F(DeviceCompareTest, AutoComparesASmallCaptureOnTheHost) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, WithSpare(b, 1));
  ASSERT_NE(src, nullptr);
  auto r = Validate(src.get(), {}, ComparePlace::kAuto);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed()) << FormatValidation(*r);
  EXPECT_EQ(r->comparison.path, "host");
  EXPECT_EQ(r->comparison.requested, "auto");
  EXPECT_TRUE(absl::StrContains(r->comparison.host_reason, "less than the 64 MiB"))
      << r->comparison.host_reason;
  EXPECT_EQ(r->comparison.host_regions, 3u);
  EXPECT_EQ(CompareLaunches(), 0u);
  EXPECT_GT(r->validate_seconds, 0);
}

TEST_F(DeviceCompareTest, TheDevicePathPassesACorrectReplayWithoutRecheckingAnything) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, WithSpare(b, 1));
  ASSERT_NE(src, nullptr);
  auto r = Validate(src.get(), {}, ComparePlace::kDevice);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed()) << FormatValidation(*r);
  const ComparisonInfo& c = r->comparison;
  EXPECT_EQ(c.path, "device") << c.host_reason;
  EXPECT_TRUE(c.host_reason.empty()) << c.host_reason;
  EXPECT_EQ(c.device_regions, 3u);
  EXPECT_EQ(c.device_bytes, 8u + kN * 8 + 3 * 4096);
  EXPECT_EQ(c.expectation_bytes, c.device_bytes);
  EXPECT_EQ(c.golden_upload_bytes, kN * 8u);  // only the data region's chunks changed
  EXPECT_EQ(c.rechecked_bytes, 0u);
  for (const RegionResult& rr : r->regions) EXPECT_TRUE(rr.on_device) << rr.index;
  EXPECT_EQ(CompareLaunches(), 1u);
  // The stats are a full pass's: every byte counted.
  EXPECT_EQ(r->regions[1].stats.bytes_compared, kN * 8u);
  EXPECT_EQ(r->regions[1].stats.elements_compared, kN * 8u);
  // Its copies are freed with the session.
  const nlohmann::json j = ValidationJson(*r);
  EXPECT_EQ(j["comparison"]["path"], "device");
  EXPECT_EQ(j["region_results"][0]["compared_on"], "device");
}

TEST_F(DeviceCompareTest, AWrongChangedChunkFailsAlikeOnBothPaths) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, WithSpare(b, 2));  // golden +2, the kernel adds 1
  ASSERT_NE(src, nullptr);
  auto host = Validate(src.get(), {}, ComparePlace::kHost);
  auto device = Validate(src.get(), {}, ComparePlace::kDevice);
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_STREQ(host->verdict(), "fail");
  EXPECT_EQ(host->comparison.path, "host");
  EXPECT_EQ(host->comparison.host_reason, "--compare-on=host");
  EXPECT_EQ(device->comparison.path, "device");
  ExpectSameVerdict(*host, *device);
  EXPECT_FALSE(device->regions[1].passed);
  EXPECT_TRUE(device->regions[2].passed);
  // Only the data region's units went back to the host.
  EXPECT_EQ(device->comparison.rechecked_bytes, kN * 8u);
}

TEST_F(DeviceCompareTest, AWriteIntoAnUnchangedChunkFailsAlikeOnBothPaths) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, WithSpare(b, 1));
  ASSERT_NE(src, nullptr);
  // add_one, plus a stray write into the second chunk of the region the
  // capture says the kernel does not change.
  FakeCuda::Get().SetKernel("add_one", [](FakeCuda& cuda, const fake::Launch& l) {
    const double ms = fake::AddOneKernel()(cuda, l);
    cuda.WriteU64(kSpareVa + 4096 + 24, 0xdeadbeef);
    return ms;
  });
  auto host = Validate(src.get(), {}, ComparePlace::kHost);
  auto device = Validate(src.get(), {}, ComparePlace::kDevice);
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_STREQ(device->verdict(), "fail");
  EXPECT_EQ(device->comparison.path, "device");
  ExpectSameVerdict(*host, *device);
  ASSERT_FALSE(device->regions[2].passed);
  EXPECT_EQ(device->regions[2].stats.first_diff_offset, 4096 + 24);
  EXPECT_EQ(device->comparison.rechecked_bytes, 3u * 4096);  // the spare region's one unit
}

TEST_F(DeviceCompareTest, UnderAToleranceTheGpuIsOnlyAPrefilter) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, WithSpare(b, 2));  // every value off by one
  ASSERT_NE(src, nullptr);
  CompareOptions o;
  RegionDTypeRule rule;
  rule.index = 1;
  rule.dtype = DType::kU64;
  o.rules.push_back(rule);
  o.tolerance.atol = 1;
  auto host = Validate(src.get(), o, ComparePlace::kHost);
  auto device = Validate(src.get(), o, ComparePlace::kDevice);
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE(device.ok()) << device.status();
  // Bitwise different, within the tolerance: a pass on both paths.
  EXPECT_TRUE(device->passed()) << FormatValidation(*device);
  EXPECT_EQ(device->regions[1].stats.elements_differing, kN);
  ExpectSameVerdict(*host, *device);
  EXPECT_EQ(device->comparison.rechecked_bytes, kN * 8u);
  // Just outside it: a fail on both.
  o.tolerance.atol = 0.5;
  host = Validate(src.get(), o, ComparePlace::kHost);
  device = Validate(src.get(), o, ComparePlace::kDevice);
  ASSERT_TRUE(host.ok() && device.ok());
  EXPECT_STREQ(device->verdict(), "fail");
  ExpectSameVerdict(*host, *device);
}

TEST_F(DeviceCompareTest, ShortDeviceMemoryFallsBackToTheHostPerRegion) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, WithSpare(b, 2));
  ASSERT_NE(src, nullptr);
  auto host = Validate(src.get(), {}, ComparePlace::kHost);
  ASSERT_TRUE(host.ok()) << host.status();
  const uint64_t total = 80ull << 30, margin = DeviceCompareMargin(total);
  // Nothing beyond the margin: every region on the host.
  FakeCuda::Get().set_mem_info(margin, total);
  auto none = Validate(src.get(), {}, ComparePlace::kDevice);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->comparison.path, "host");
  EXPECT_TRUE(absl::StrContains(none->comparison.host_reason, "does not fit"))
      << none->comparison.host_reason;
  EXPECT_EQ(none->comparison.host_regions, 3u);
  EXPECT_EQ(CompareLaunches(), 0u);
  ExpectSameVerdict(*host, *none);
  // Room for the 8-byte table region only: the others on the host.
  FakeCuda::Get().set_mem_info(margin + 8 + 256 + 100, total);
  auto mixed = Validate(src.get(), {}, ComparePlace::kDevice);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(mixed->comparison.path, "mixed");
  EXPECT_EQ(mixed->comparison.device_regions, 1u);
  EXPECT_EQ(mixed->comparison.host_regions, 2u);
  EXPECT_TRUE(mixed->regions[0].on_device);
  EXPECT_FALSE(mixed->regions[1].on_device);
  EXPECT_TRUE(absl::StrContains(mixed->comparison.host_reason, "2 device region(s)"))
      << mixed->comparison.host_reason;
  ExpectSameVerdict(*host, *mixed);
}

TEST_F(DeviceCompareTest, AStateLaunchedOnBeforeTheCopyIsComparedOnTheHost) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, WithSpare(b, 1));
  ASSERT_NE(src, nullptr);
  auto s = ReplaySession::Create(src.get(), SessionOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Launch().ok());  // the memory now holds the post image
  CompareOptions o;
  o.place = ComparePlace::kDevice;
  auto r = (*s)->Validate(o);  // a second launch: add_one twice is a fail
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->comparison.path, "host");
  EXPECT_TRUE(absl::StrContains(r->comparison.host_reason, "launched on before"))
      << r->comparison.host_reason;
  EXPECT_STREQ(r->verdict(), "fail");
}

TEST_F(DeviceCompareTest, ARelocatedReplayValidatesOnTheDevice) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, WithSpare(b, 1));
  ASSERT_NE(src, nullptr);
  SessionOptions so;
  so.force_relocation = true;  // the table's pointer is patched in both images
  auto r = Validate(src.get(), {}, ComparePlace::kDevice, so);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->info.relocated);
  EXPECT_EQ(r->comparison.path, "device");
  EXPECT_TRUE(r->passed()) << FormatValidation(*r);
  EXPECT_EQ(r->comparison.rechecked_bytes, 0u);
}

TEST_F(DeviceCompareTest, BenchValidatesOnTheDeviceAndFreesItsCopies) {
  testing::KcapBuilder b(4096);
  auto src = Write(b, WithSpare(b, 1));
  ASSERT_NE(src, nullptr);
  {
    auto s = ReplaySession::Create(src.get(), SessionOptions{});
    ASSERT_TRUE(s.ok()) << s.status();
    BenchOptions bo;
    bo.warmup = 1;
    bo.iterations = 2;
    bo.compare.place = ComparePlace::kDevice;
    auto r = (*s)->Bench(bo);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->kernel_before.has_value() && r->kernel_after.has_value());
    EXPECT_TRUE(r->verdicts_pass()) << FormatBench(*r);
    EXPECT_EQ(r->kernel_before->comparison.path, "device");
    EXPECT_EQ(r->kernel_after->comparison.path, "device");
    EXPECT_GT(FakeCuda::Get().allocated_bytes(), 0u);
  }
  EXPECT_EQ(FakeCuda::Get().allocated_bytes(), 0u);
}

TEST_F(DeviceCompareTest, TheCliTakesCompareOn) {
  testing::KcapBuilder b(4096);
  const std::string kcap = Path("c.kcap");
  ASSERT_TRUE(b.Write(kcap, WithSpare(b, 1)).ok());
  auto run = [&](const std::string& args, std::string* out) {
    return RunReplayCli(absl::StrCat(args, " '", kcap, "' 2>&1"), out);
  };
  std::string json, text, bad;
  EXPECT_EQ(run("validate --json --compare-on=device", &json), 0) << json;
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << json;
  EXPECT_EQ(j["comparison"]["path"], "device");
  EXPECT_EQ(j["comparison"]["requested"], "device");
  EXPECT_EQ(j["result"], "pass");
  EXPECT_EQ(run("validate --compare-on=host", &text), 0) << text;
  EXPECT_TRUE(absl::StrContains(text, "compare: path host")) << text;
  EXPECT_TRUE(absl::StrContains(text, "validate: ")) << text;
  EXPECT_EQ(run("validate --compare-on=gpu", &bad), 2) << bad;  // a usage error
}

// Numeric flags are checked while parsing and tell a type error from a range
// error, naming the option and what was given (common/cli_values.h), for
// run/validate/bench/profile and submit alike; the capture is never opened.
TEST(ReplayCliNumbersTest, TypeAndRangeErrorsNameTheOption) {
  struct Case {
    const char* args;
    const char* expected;
  };
  const Case cases[] = {
      {"bench /nonexistent.kcap --iterations=abc",
       "--iterations: expected a whole number (1 to 2147483647), got \"abc\""},
      {"bench /nonexistent.kcap --iterations=0", "--iterations: must be 1 to 2147483647, got 0"},
      {"bench /nonexistent.kcap --warmup=-1", "--warmup: must be 0 to 2147483647, got -1"},
      {"validate /nonexistent.kcap --rtol=-1", "--rtol: must be 0 or more, got -1"},
      {"validate /nonexistent.kcap --atol=x", "--atol: expected a number (0 or more), got \"x\""},
      {"validate /nonexistent.kcap --ulp=1.5", "--ulp: expected a whole number (0 or more)"},
      {"run /nonexistent.kcap --device=-2", "--device: must be 0 to 2147483647, got -2"},
      {"run /nonexistent.kcap --shared-mem=4294967296",
       "--shared-mem: must be 0 to 4294967295, got 4294967296"},
      {"profile /nonexistent.kcap --ncu-timeout=soon",
       "--ncu-timeout: expected a whole number (1 to 2147483647), got \"soon\""},
      {"submit --socket=/nonexistent.sock c.cubin --iterations=100001",
       "--iterations: must be 0 to 100000, got 100001"},
      {"submit --socket=/nonexistent.sock c.cubin --timeout=1e3",
       "--timeout: expected a whole number (0 to 2147483647), got \"1e3\""},
  };
  for (const Case& c : cases) {
    std::string out;
    EXPECT_EQ(RunReplayCli(absl::StrCat(c.args, " 2>&1"), &out), 2)
        << c.args << "\n" << out;  // a usage error
    EXPECT_TRUE(absl::StrContains(out, c.expected)) << c.args << "\n" << out;
    EXPECT_FALSE(absl::StrContains(out, "1.79769e+308")) << out;
  }
}

}  // namespace
}  // namespace kerncap::replay
