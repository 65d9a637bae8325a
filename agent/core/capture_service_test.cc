#include "agent/core/capture_service.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "agent/testing/fake_transport.h"
#include "gtest/gtest.h"

namespace kerncap::agent {
namespace {

// One host buffer as the device's only region.
class OneRegionSource : public DispatchSource {
 public:
  explicit OneRegionSource(std::string* memory) : memory_(memory) {}
  Status Quiesce() override { return OkStatus(); }
  Result<std::vector<RegionDesc>> Regions() override {
    return std::vector<RegionDesc>{RegionDesc{0x1000, memory_->size(), RegionKind::kDevice, 0, ""}};
  }
  Result<std::vector<CodeObjectRef>> CodeObjects() override { return std::vector<CodeObjectRef>{}; }
  Status ReadRegion(const RegionDesc&, uint64_t offset, void* dst, size_t size) override {
    std::memcpy(dst, memory_->data() + offset, size);
    return OkStatus();
  }
  Status WaitForDispatch() override { return OkStatus(); }

 private:
  std::string* memory_;
};

// A FakeTransport whose End, like the daemon link's, returns before the verdict.
class AsyncFakeTransport : public FakeTransport {
 public:
  bool AsyncEnd() const override { return true; }
};

CaptureHeader Header(const std::string& kernel) {
  CaptureHeader h;
  h.arm_id = "arm-1";
  h.dispatch_index = 1;
  h.kernel.demangled_name = kernel;
  h.kernel.mangled_name = kernel;
  return h;
}

TEST(CaptureServiceTest, BeginEndCommitsCountsAndReleasesOnce) {
  CaptureService service;
  FakeTransport t;
  service.SetTransport(&t);
  EXPECT_EQ(service.transport(), &t);
  std::string memory(6000, 'x');
  const auto gate_taken = std::chrono::steady_clock::now();
  auto c = service.Begin(&t, std::make_unique<OneRegionSource>(&memory), Header("k"), "args",
                         gate_taken);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c.value()->header().kernel.demangled_name, "k");
  memory.assign(6000, 'y');  // the dispatch ran
  int released = 0;
  service.End(&t, std::move(c.value()), /*launch_ok=*/true, [&] { ++released; });
  EXPECT_EQ(released, 1);
  ASSERT_EQ(t.committed().size(), 1u);
  EXPECT_EQ(t.committed()[0].pre[0].bytes, std::string(6000, 'x'));
  EXPECT_EQ(t.committed()[0].post[0].bytes, std::string(6000, 'y'));
  EXPECT_EQ(service.captures_committed(), 1u);
  EXPECT_EQ(service.captures_failed(), 0u);
  LastCaptureFigures last = service.last_capture();
  EXPECT_EQ(last.regions, 1u);
  EXPECT_EQ(last.pre_bytes, 6000u);
  EXPECT_GE(last.held_seconds, 0.0);
}

TEST(CaptureServiceTest, FailedLaunchAbortsAndCountsAFailure) {
  CaptureService service;
  FakeTransport t;
  std::string memory(100, 'a');
  auto c = service.Begin(&t, std::make_unique<OneRegionSource>(&memory), Header("k"), "",
                         std::chrono::steady_clock::now());
  ASSERT_TRUE(c.ok());
  int released = 0;
  service.End(&t, std::move(c.value()), /*launch_ok=*/false, [&] { ++released; });
  EXPECT_EQ(released, 1) << "the application is released however the capture ends";
  EXPECT_TRUE(t.committed().empty());
  EXPECT_EQ(t.aborted().size(), 1u);
  EXPECT_EQ(service.captures_failed(), 1u);
  EXPECT_EQ(service.captures_committed(), 0u);
}

TEST(CaptureServiceTest, AsynchronousEndCountsOnlyTheDaemonsVerdict) {
  CaptureService service;
  AsyncFakeTransport t;
  std::string memory(100, 'a');
  auto c = service.Begin(&t, std::make_unique<OneRegionSource>(&memory), Header("k"), "",
                         std::chrono::steady_clock::now());
  ASSERT_TRUE(c.ok());
  service.End(&t, std::move(c.value()), true, [] {});
  EXPECT_EQ(service.captures_committed(), 0u) << "not committed until kerncapd says so";
  service.OnVerdict("cap-1", "", 0.5);
  EXPECT_EQ(service.captures_committed(), 1u);
  service.OnVerdict("", "store full", 0.1);
  EXPECT_EQ(service.captures_failed(), 1u);
}

TEST(CaptureServiceTest, BeginWithoutTransportOrWithRefusalSaysWhy) {
  CaptureService service;
  std::string memory(10, 'a');
  auto none = service.Begin(nullptr, std::make_unique<OneRegionSource>(&memory), Header("k"), "",
                            std::chrono::steady_clock::now());
  EXPECT_FALSE(none.ok());
  FakeTransport t;
  t.RefuseBegin(true);
  auto refused = service.Begin(&t, std::make_unique<OneRegionSource>(&memory), Header("k"), "",
                               std::chrono::steady_clock::now());
  EXPECT_FALSE(refused.ok());
  EXPECT_FALSE(refused.error().empty());
}

TEST(CaptureServiceTest, SkipIsCountedAndReportedOnTheArm) {
  CaptureService service;
  FakeTransport t;
  t.Arm("k");
  service.Skip(&t, CaptureTicket{"arm-7", 3, ""}, KernelMatchInfo{"_Z1kv", "k()", 1, {}},
               "the gate timed out", /*give_back=*/true);
  ASSERT_EQ(t.skipped().size(), 1u);
  EXPECT_EQ(t.skipped()[0].ticket.arm_id, "arm-7");
  EXPECT_EQ(t.skipped()[0].reason, "the gate timed out");
  EXPECT_TRUE(t.skipped()[0].give_back);
  EXPECT_EQ(service.captures_failed(), 1u);
  service.Skip(nullptr, CaptureTicket{"arm-7", 4, ""}, KernelMatchInfo{}, "no link", false);
  EXPECT_EQ(service.captures_failed(), 2u);
}

TEST(CaptureServiceTest, FiguresAndForkReset) {
  CaptureService service;
  service.SetRingBytes(1 << 20);
  service.SetHeldSeconds(0.25);
  EXPECT_EQ(service.last_capture().ring_bytes, 1u << 20);
  EXPECT_DOUBLE_EQ(service.last_capture().held_seconds, 0.25);
  service.CountFailure();
  service.ResetAfterFork(/*zero_counters=*/false);
  EXPECT_EQ(service.captures_failed(), 1u);
  service.ResetAfterFork(/*zero_counters=*/true);
  EXPECT_EQ(service.captures_failed(), 0u);
  EXPECT_TRUE(service.gate().TryEnterExclusive(std::chrono::milliseconds(10)));
  service.gate().ExitExclusive();
}

}  // namespace
}  // namespace kerncap::agent
