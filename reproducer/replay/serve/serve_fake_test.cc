// The resident evaluator (`kerncap-replay serve`) on the fake CUDA driver
// (../testing/fake_cuda.h): candidates' module variables matched by stable
// identity, verdicts that say what was not compared, the revalidation after
// the timing, and the L2 protocol of the timing, without a GPU. The device
// comparison kernel is the fake's built-in (bitwise, as every test here
// compares).
#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "reproducer/replay/serve/evaluator.h"
#include "reproducer/replay/serve/resident_state.h"
#include "reproducer/replay/testing/fake_cuda.h"
#include "reproducer/replay/testing/internal_linkage_fixture.h"

namespace kerncap::replay::serve {
namespace {

using fake::FakeCuda;
using testing::kCounterA;
using testing::kCounterB;
using testing::kScaleB;

class ServeFakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeCuda& f = FakeCuda::Get();
    f.Reset();
    f.SetKernel("scale", testing::ScaleKernel);
    path_ = (std::filesystem::temp_directory_path() /
             absl::StrCat("kc_serve_fake_", ::getpid(), "_",
                          ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                          ".kcap"))
                .string();
    testing::KcapBuilder b(4096);
    ASSERT_TRUE(b.Write(path_, testing::ScaleCapture(b, 10 + testing::kScaleN, "scale",
                                                     /*spare=*/true))
                    .ok());
    auto src = CaptureSource::OpenKcap(path_);
    ASSERT_TRUE(src.ok()) << src.status();
    src_ = std::move(*src);
    auto state = ResidentState::Create(src_.get(), SessionOptions{});
    ASSERT_TRUE(state.ok()) << state.status();
    state_ = std::move(*state);
    auto e = ResidentEvaluator::Create(state_.get());
    if (!e.ok() && absl::StrContains(e.status().message(), "built without nvcc")) {
      GTEST_SKIP() << e.status().message();
    }
    ASSERT_TRUE(e.ok()) << e.status();
    evaluator_ = std::move(*e);
  }
  void TearDown() override {
    evaluator_.reset();
    state_.reset();
    std::filesystem::remove(path_);
  }

  // A candidate: scale rebuilt with `variables`, run by the fake with `k`
  // when given (else the scale kernel).
  EvaluateRequest Candidate(std::vector<testing::ElfVariable> variables, const std::string& tag,
                            fake::Kernel k = nullptr) {
    EvaluateRequest r;
    r.code_object = testing::ScaleCubin(std::move(variables), "scale", tag);
    if (k) FakeCuda::Get().SetKernelForImage(*r.code_object, "scale", std::move(k));
    r.iterations = 4;
    r.warmup = 1;
    return r;
  }

  std::string path_;
  std::unique_ptr<CaptureSource> src_;
  std::unique_ptr<ResidentState> state_;
  std::unique_ptr<ResidentEvaluator> evaluator_;
};

const RegionVerdict* Find(const ValidationSummary& v, size_t index) {
  for (const RegionVerdict& r : v.regions) {
    if (r.index == index) return &r;
  }
  return nullptr;
}

TEST_F(ServeFakeTest, ACandidatesRenamedInternalVariablesAreRestoredAndCompared) {
  auto r = evaluator_->Evaluate(Candidate({{kScaleB, 4}, {kCounterB, 4}}, "rebuilt"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->validation.verdict(), "pass") << EvaluateAnswer(1, *r).dump(1);
  EXPECT_TRUE(r->validation.not_compared.empty());
  const RegionVerdict* counter = Find(r->validation, 3);
  ASSERT_NE(counter, nullptr);  // written: listed
  EXPECT_EQ(counter->name, kCounterA);
  EXPECT_TRUE(counter->passed);
  ASSERT_TRUE(r->revalidation.has_value());
  EXPECT_STREQ(r->revalidation->verdict(), "pass");
  EXPECT_TRUE(r->verdicts_pass());
}

TEST_F(ServeFakeTest, ACandidateLackingAVariableIsIncompleteNotPassed) {
  auto r = evaluator_->Evaluate(Candidate({{kScaleB, 4}}, "no counter"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->validation.verdict(), "incomplete");
  ASSERT_EQ(r->validation.not_compared.size(), 1u);
  EXPECT_EQ(r->validation.not_compared[0].name, kCounterA);
  EXPECT_FALSE(r->verdicts_pass());
  const nlohmann::json j = EvaluateAnswer(1, *r);
  EXPECT_EQ(j["validation"]["passed"], false);
  EXPECT_EQ(j["validation"]["verdict"], "incomplete");
}

// A candidate without the (unchanged, pointed-to by nothing) scale variable
// cannot reach it: a note, not a gap. The note never hides a wrong result:
// this kernel needed the variable, computes with scale 0, and fails on its
// outputs.
TEST_F(ServeFakeTest, AnUnreachableVariableIsANoteAndOutputsStillJudge) {
  auto r = evaluator_->Evaluate(Candidate({{kCounterB, 4}}, "no scale"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->validation.not_compared.empty()) << EvaluateAnswer(1, *r).dump(1);
  ASSERT_EQ(r->validation.unreachable.size(), 1u);
  EXPECT_EQ(r->validation.unreachable[0].name, testing::kScaleA);
  EXPECT_STREQ(r->validation.verdict(), "fail");
  const nlohmann::json j = EvaluateAnswer(1, *r);
  EXPECT_EQ(j["validation"]["unreachable"][0]["name"], testing::kScaleA);
}

TEST_F(ServeFakeTest, RevalidationCatchesACandidateThatCorruptsStateOnLaterLaunches) {
  auto r = evaluator_->Evaluate(Candidate(
      {{kScaleB, 4}, {kCounterB, 4}}, "late", [](FakeCuda& cuda, const fake::Launch& l) {
        const double ms = testing::ScaleKernel(cuda, l);
        if (l.launches_of_function >= 2) cuda.WriteU64(testing::kScaleSpareVa + 8, 0x77);
        return ms;
      }));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->validation.verdict(), "pass");
  ASSERT_TRUE(r->revalidation.has_value());
  EXPECT_STREQ(r->revalidation->verdict(), "fail");
  const RegionVerdict* spare = Find(*r->revalidation, 4);
  ASSERT_NE(spare, nullptr);
  EXPECT_FALSE(spare->passed);
  EXPECT_FALSE(spare->written);
  EXPECT_FALSE(r->verdicts_pass());
  // The next candidate starts from pristine state again.
  auto next = evaluator_->Evaluate(Candidate({{kScaleB, 4}, {kCounterB, 4}}, "fine"));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(next->verdicts_pass()) << EvaluateAnswer(1, *next).dump(1);
}

// The timing: persisting L2 reset (a previous user's limit back after), a
// cold-L2 flush after the restores and before the start event, the events
// around the kernel alone; the captured binary validated before and after.
TEST_F(ServeFakeTest, TheTimingResetsPersistingL2AndFlushesOutsideTheEvents) {
  auto drv = CudaDriver::Get();
  ASSERT_TRUE(drv.ok());
  ASSERT_EQ((*drv)->cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 2 << 20), CUDA_SUCCESS);
  EvaluateRequest req = Candidate({{kScaleB, 4}, {kCounterB, 4}}, "timed");
  req.cold_l2 = true;
  req.compare_original = true;
  FakeCuda::Get().clear_log();
  auto r = evaluator_->Evaluate(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->persisting_l2.limit_before, 2u << 20);
  EXPECT_EQ(r->persisting_l2.limit_during, 0u);
  EXPECT_EQ(FakeCuda::Get().persisting_l2_limit(), 2u << 20);
  EXPECT_TRUE(r->cold_l2);
  EXPECT_EQ(r->l2_flush_bytes, 100u << 20);
  EXPECT_DOUBLE_EQ(r->kernel_ms.median_ms, 0.5);
  EXPECT_DOUBLE_EQ(r->kernel_ms.max_ms, 0.5);
  EXPECT_DOUBLE_EQ(r->original_ms.max_ms, 0.5);
  EXPECT_DOUBLE_EQ(r->speedup.speedup, 1.0);
  ASSERT_TRUE(r->original_validation.has_value());
  EXPECT_STREQ(r->original_validation->verdict(), "pass");
  ASSERT_TRUE(r->original_revalidation.has_value());
  EXPECT_STREQ(r->original_revalidation->verdict(), "pass");
  const std::vector<std::string> log = FakeCuda::Get().log();
  // Launches between an event pair: the candidate's and the original's
  // validations, the timed ones (warm-up included), then both revalidations.
  std::vector<size_t> evented;
  for (size_t i = 2; i + 1 < log.size(); ++i) {
    if (log[i] == "launch scale" && log[i - 1] == "event") evented.push_back(i);
  }
  ASSERT_EQ(evented.size(), 2u + 2 * (4 + 1) + 2);
  size_t timed = 0;
  for (size_t k = 2; k + 2 < evented.size(); ++k) {
    const size_t i = evented[k];
    ++timed;
    EXPECT_TRUE(absl::StartsWith(log[i - 2], "memset32 ")) << log[i - 2];
    EXPECT_TRUE(absl::EndsWith(log[i - 2], " 104857600")) << log[i - 2];
    EXPECT_EQ(log[i + 1], "event");
  }
  EXPECT_EQ(timed, 2u * (4 + 1));  // candidate and original, warm-up included
}

// scale as one thread per element: only elements below grid*block are
// written, so its output depends on the launch shape.
double PerThreadScale(FakeCuda& cuda, const fake::Launch& l) {
  fake::Launch part = l;
  uint32_t n = 0;
  std::memcpy(&n, l.args.data() + 16, 4);
  const uint64_t threads = uint64_t{l.grid[0]} * l.block[0];
  if (threads >= n) return testing::ScaleKernel(cuda, l);
  // Scale the first `threads` elements; the counter still counts n.
  uint64_t out = 0, in = 0;
  std::memcpy(&out, l.args.data(), 8);
  std::memcpy(&in, l.args.data() + 8, 8);
  std::vector<float> v(threads);
  if (!cuda.Read(in, v.data(), threads * 4)) return -1;
  auto scale_at = cuda.GlobalOf(l, testing::kScaleB);
  if (!scale_at) scale_at = cuda.GlobalOf(l, testing::kScaleA);
  float scale = 0;
  if (scale_at) cuda.Read(*scale_at, &scale, 4);
  for (float& x : v) x *= scale;
  cuda.Write(out, v.data(), threads * 4);
  auto counter_at = cuda.GlobalOf(l, testing::kCounterB);
  if (!counter_at) counter_at = cuda.GlobalOf(l, testing::kCounterA);
  if (counter_at) {
    uint32_t c = 0;
    cuda.Read(*counter_at, &c, 4);
    c += n;
    cuda.Write(*counter_at, &c, 4);
  }
  return 0.5;
}

TEST_F(ServeFakeTest, PerRequestLaunchOverridesAndTheLaunchShapeProbe) {
  FakeCuda::Get().SetKernel("scale", PerThreadScale);
  // Two blocks of 128 cover the 256 elements: passes at the new shape.
  EvaluateRequest ok = Candidate({{kScaleB, 4}, {kCounterB, 4}}, "ok");
  ok.launch.grid = Dim3{2, 1, 1};
  ok.launch.block = Dim3{128, 1, 1};
  auto r = evaluator_->Evaluate(ok);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->validation.verdict(), "pass");
  EXPECT_EQ(r->launch, "grid=(2,1,1) block=(128,1,1) smem=0");
  EXPECT_TRUE(r->verdicts_pass());
  // One block of 128: the captured code object fails there too while it
  // passes at the captured launch: launch-shape dependent, not a wrong candidate.
  EvaluateRequest half = Candidate({{kScaleB, 4}, {kCounterB, 4}}, "half");
  half.launch.block = Dim3{128, 1, 1};
  r = evaluator_->Evaluate(half);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->validation.verdict(), "launch_shape_dependent");
  EXPECT_FALSE(r->verdicts_pass());
  EXPECT_EQ(r->validation.shape_probe["captured_code_at_override"], "fail");
  EXPECT_EQ(r->validation.shape_probe["captured_code_at_captured_launch"], "pass");
  nlohmann::json answer = EvaluateAnswer(nullptr, *r);
  EXPECT_EQ(answer["validation"]["verdict"], "launch_shape_dependent");
  // The next request without "launch" runs the captured launch again.
  r = evaluator_->Evaluate(Candidate({{kScaleB, 4}, {kCounterB, 4}}, "plain"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_STREQ(r->validation.verdict(), "pass");
  EXPECT_EQ(r->launch, "");
  // An impossible launch is an error for that request only.
  EvaluateRequest big = Candidate({{kScaleB, 4}, {kCounterB, 4}}, "big");
  big.launch.block = Dim3{4096, 1, 1};
  r = evaluator_->Evaluate(big);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(evaluator_->lost());
}

}  // namespace
}  // namespace kerncap::replay::serve
