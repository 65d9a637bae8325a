// Tests of lazy rings (staging created only for agents that may capture, under
// a total budget), asynchronous capture ends and skipped-dispatch reports.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "agent/link/agent_link_client.h"
#include "agent/testing/synthetic_content.h"
#include "daemon/agent_link/agent_link_server.h"
#include "daemon/agent_link/agent_link_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kerncap::link::testing {
namespace {

using ::testing::HasSubstr;

class StagingTest : public AgentLinkTest {
 protected:
  agent::AgentLinkClient& NewLazyClient(const std::string& process_name = "lazy-app") {
    agent::AgentLinkClientOptions o;
    o.socket_path = socket_;
    o.identity.process_name = process_name;
    o.identity.platform = Platform::kSynthetic;
    o.retry_initial_ms = 10;
    o.retry_max_ms = 50;
    o.initial_wait_ms = 2000;
    o.lazy_ring = true;
    o.on_ring_mapped = [this](uint8_t*, uint64_t bytes) {
      std::lock_guard<std::mutex> lock(mu_);
      mapped_.push_back(bytes);
    };
    o.on_capture_result = [this](const agent::CaptureOutcome& out) {
      std::lock_guard<std::mutex> lock(mu_);
      outcomes_.push_back(out);
    };
    clients_.push_back(std::make_unique<agent::AgentLinkClient>(o));
    clients_.back()->Start();
    return *clients_.back();
  }

  // Waits until `client` has a ring.
  static bool WaitRing(agent::AgentLinkClient& client, int timeout_ms = 5000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      if (client.ring_bytes() > 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  std::mutex mu_;
  std::vector<uint64_t> mapped_;
  std::vector<agent::CaptureOutcome> outcomes_;
};

TEST_F(StagingTest, RingIsCreatedOnlyOnceAnArmApplies) {
  StartServer();
  agent::AgentLinkClient& idle = NewLazyClient("idle-app");
  agent::AgentLinkClient& client = NewLazyClient();
  ASSERT_TRUE(client.connected()) << client.last_error();
  ASSERT_TRUE(idle.connected()) << idle.last_error();
  EXPECT_EQ(client.ring_bytes(), 0u);
  EXPECT_EQ(server_->RingBytesInUse(), 0u);

  v1::ArmRequest req;
  req.mutable_selector()->set_kernel("k");
  req.mutable_selector()->set_process_name("lazy-app");
  ASSERT_TRUE(server_->Arm(req, RootCaller()).ok());
  ASSERT_TRUE(WaitRing(client));
  EXPECT_EQ(client.ring_bytes(), 4u * kChunk);
  EXPECT_EQ(server_->RingBytesInUse(), 4u * kChunk);
  // The agent the arm does not apply to costs no staging.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(idle.ring_bytes(), 0u);
  std::lock_guard<std::mutex> lock(mu_);
  ASSERT_EQ(mapped_.size(), 1u);
  EXPECT_EQ(mapped_[0], 4u * kChunk);
}

TEST_F(StagingTest, BeginCaptureAsksForTheRingWhenTheArmCameLate) {
  StartServer();
  agent::AgentLinkClient& client = NewLazyClient();
  ASSERT_TRUE(client.connected());
  EXPECT_EQ(client.ring_bytes(), 0u);
  // An arm for another process: this client never hears of it, so only its
  // BeginCapture can ask for the ring. The capture names an arm that does
  // not apply to it and is refused, but the ring request is served.
  v1::ArmRequest req;
  req.mutable_selector()->set_kernel("k");
  req.mutable_selector()->set_process_name("someone-else");
  absl::StatusOr<v1::ArmInfo> arm = server_->Arm(req, RootCaller());
  ASSERT_TRUE(arm.ok());
  std::string pre = agent::testing::SyntheticBytes(5, 0, 0, 3 * kChunk + 7);
  absl::StatusOr<std::string> id = DoCapture(client, arm->arm_id(), "k", {pre}, {});
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("does not apply to this process"));
  {
    // It had a ring for the capture, and gave it back after: no arm applies.
    std::lock_guard<std::mutex> lock(mu_);
    ASSERT_EQ(mapped_.size(), 1u);
    EXPECT_EQ(mapped_[0], 4u * kChunk);
  }
  ASSERT_TRUE(Eventually([&] { return server_->RingBytesInUse() == 0; }));
  // With an arm that applies, the capture goes through the same ring.
  id = DoCapture(client, ArmKernel("k").arm_id(), "k", {pre}, {});
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(sink_.captures().size(), 1u);
  EXPECT_TRUE(sink_.captures()[0].regions[0].bytes == pre);
}

TEST_F(StagingTest, EndAsyncReturnsBeforeTheVerdictWhichArrivesLater) {
  sink_.async_consume = true;
  StartServer();
  agent::AgentLinkClient& client = NewLazyClient();
  ASSERT_TRUE(client.connected());
  ArmKernel("k");
  ASSERT_TRUE(client.WaitArms(1, 5000));
  ASSERT_TRUE(WaitRing(client));
  auto match = client.ShouldCapture("k", "", 0);
  ASSERT_TRUE(match.has_value());

  CaptureBeginMsg begin;
  begin.arm_id = match->arm_id;
  begin.demangled_name = "k";
  auto session = client.BeginCapture(begin, "ARGS");
  ASSERT_TRUE(session.ok()) << session.error();
  RegionBeginMsg region;
  region.va = agent::testing::SyntheticVa(0);
  std::string bytes = agent::testing::SyntheticBytes(9, 0, 0, 3 * kChunk);
  region.size = bytes.size();
  auto h = (*session)->AddRegion(region);
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE((*session)->WriteRegion(*h, bytes.data(), bytes.size()).ok());
  ASSERT_TRUE((*session)->EndAsync().ok());
  session->reset();  // the session may go at once; the client keeps the verdict

  ASSERT_TRUE(client.WaitCaptureSettled(10000));
  std::optional<agent::CaptureOutcome> out = client.last_capture_outcome();
  ASSERT_TRUE(out.has_value());
  EXPECT_TRUE(out->error.empty()) << out->error;
  EXPECT_THAT(out->capture_id, HasSubstr("cap-"));
  // on_capture_result runs on the link thread right after the verdict lands.
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(mu_);
    return !outcomes_.empty();
  }));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSERT_EQ(outcomes_.size(), 1u);
    EXPECT_EQ(outcomes_[0].capture_id, out->capture_id);
  }
  ASSERT_EQ(sink_.captures().size(), 1u);
  EXPECT_TRUE(sink_.captures()[0].committed);
  EXPECT_TRUE(sink_.captures()[0].regions[0].bytes == bytes);
  // The next capture is possible (the client is free again).
  EXPECT_TRUE(DoCapture(client, ArmKernel("k2").arm_id(), "k2", {bytes}, {}).ok());
}

TEST_F(StagingTest, EndAsyncDeliversDaemonFailure) {
  StartServer();
  agent::AgentLinkClient& client = NewLazyClient();
  ASSERT_TRUE(client.connected());
  sink_.fail_add_region = 1;
  CaptureBeginMsg begin;
  begin.arm_id = ArmKernel("k").arm_id();
  begin.demangled_name = "k";
  auto session = client.BeginCapture(begin, "");
  ASSERT_TRUE(session.ok()) << session.error();
  RegionBeginMsg region;
  region.size = kChunk;
  ASSERT_TRUE((*session)->AddRegion(region).ok());
  (void)(*session)->EndAsync();
  ASSERT_TRUE(client.WaitCaptureSettled(10000));
  std::optional<agent::CaptureOutcome> out = client.last_capture_outcome();
  ASSERT_TRUE(out.has_value());
  EXPECT_THAT(out->error, HasSubstr("disk full"));
  EXPECT_TRUE(out->capture_id.empty());
}

// Watches RingBytesInUse() from a thread and keeps the largest value seen.
class BudgetWatch {
 public:
  explicit BudgetWatch(AgentLinkServer& server)
      : thread_([this, &server] {
          while (!stop_) {
            max_ = std::max<uint64_t>(max_, server.RingBytesInUse());
            std::this_thread::sleep_for(std::chrono::microseconds(200));
          }
        }) {}
  ~BudgetWatch() { Stop(); }
  uint64_t Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return max_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> max_{0};
  std::thread thread_;
};

TEST_F(StagingTest, IdleAgentsGiveTheirRingBack) {
  StartServer();
  agent::AgentLinkClient& client = NewLazyClient();
  ASSERT_TRUE(client.connected());
  v1::ArmInfo arm = ArmKernel("k");
  ASSERT_TRUE(WaitRing(client));
  EXPECT_EQ(server_->RingBytesInUse(), 4u * kChunk);
  // Disarmed: nothing may capture, so the ring goes back.
  v1::DisarmRequest disarm;
  disarm.set_arm_id(arm.arm_id());
  ASSERT_TRUE(server_->Disarm(disarm, RootCaller()).ok());
  ASSERT_TRUE(Eventually([&] { return server_->RingBytesInUse() == 0; }))
      << server_->RingBytesInUse();
  EXPECT_EQ(client.ring_bytes(), 0u);
  // A new arm brings a ring again; its one capture done, the ring goes.
  v1::ArmInfo again = ArmKernel("k");
  ASSERT_TRUE(WaitRing(client));
  auto match = client.ShouldCapture("k", "", 0);
  ASSERT_TRUE(match.has_value());
  std::string data = agent::testing::SyntheticBytes(4, 0, 0, 3 * kChunk);
  ASSERT_TRUE(DoCapture(client, match->arm_id, "k", {data}, {}).ok());
  ASSERT_TRUE(Eventually([&] { return server_->RingBytesInUse() == 0; }))
      << server_->RingBytesInUse();
  EXPECT_EQ(client.ring_bytes(), 0u);
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(mapped_.size(), 2u);
}

// Two arms, both taken by dispatches before either capture began (a graph
// launch captures two of its nodes): the first capture's end leaves no arm,
// so the ring goes back while the second capture waits for the first; the
// second must then get a new ring, not fail with "not granted".
TEST_F(StagingTest, ACaptureWaitingForThePreviousOneGetsARingAgain) {
  StartServer();
  agent::AgentLinkClient& client = NewLazyClient();
  ASSERT_TRUE(client.connected());
  ArmKernel("k1");
  ArmKernel("k2");
  ASSERT_TRUE(WaitRing(client));
  std::optional<agent::ArmMatch> first, second;
  ASSERT_TRUE(Eventually([&] { return (first = client.ShouldCapture("k1", "", 0)).has_value(); }));
  ASSERT_TRUE(Eventually([&] { return (second = client.ShouldCapture("k2", "", 0)).has_value(); }));
  CaptureBeginMsg begin;
  begin.arm_id = first->arm_id;
  begin.demangled_name = "k1";
  begin.mangled_name = agent::testing::SyntheticMangled("k1");
  begin.platform = Platform::kSynthetic;
  auto s1 = client.BeginCapture(begin, "");
  ASSERT_TRUE(s1.ok()) << s1.error();
  RegionBeginMsg r;
  r.va = agent::testing::SyntheticVa(0);
  r.size = kChunk;
  r.image = ImageKind::kPre;
  auto h = (*s1)->AddRegion(r);
  ASSERT_TRUE(h.ok());
  const std::string data = agent::testing::SyntheticBytes(5, 0, 0, kChunk);
  ASSERT_TRUE((*s1)->WriteRegion(*h, data.data(), data.size()).ok());
  absl::StatusOr<std::string> id2 = absl::UnknownError("not run");
  std::thread t([&] { id2 = DoCapture(client, second->arm_id, "k2", {data}, {}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // t waits for capture 1
  auto id1 = (*s1)->End();
  ASSERT_TRUE(id1.ok()) << id1.error();
  t.join();
  EXPECT_TRUE(id2.ok()) << id2.status();
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(mapped_.size(), 2u) << "the ring went back after capture 1 and came again";
}

TEST_F(StagingTest, TotalStagingBudgetIsAHardBoundAndServesCapturesFirst) {
  AgentLinkServerOptions o = Options();
  o.slot_count = 8;
  o.max_total_ring_bytes = 11 * kChunk;  // first ring: 8 slots; second: 3
  StartServer(o);
  BudgetWatch watch(*server_);
  agent::AgentLinkClient& a = NewLazyClient("app-a");
  ASSERT_TRUE(a.connected());
  ArmKernel("k", /*count=*/3);
  ASSERT_TRUE(WaitRing(a));
  EXPECT_EQ(a.ring_bytes(), 8u * kChunk);
  agent::AgentLinkClient& b = NewLazyClient("app-b");
  ASSERT_TRUE(WaitRing(b));
  EXPECT_EQ(b.ring_bytes(), 3u * kChunk);
  EXPECT_EQ(server_->RingBytesInUse(), 11u * kChunk);
  // The budget is used up: an agent that is only armed gets no ring ...
  agent::AgentLinkClient& c = NewLazyClient("app-c");
  ASSERT_TRUE(c.WaitArms(1, 5000));
  ASSERT_TRUE(Eventually([&] { return c.last_error().find("staging") != std::string::npos; }))
      << c.last_error();
  EXPECT_EQ(c.ring_bytes(), 0u);
  // ... but its capture does: the idle rings of a and b are asked back.
  std::string big = agent::testing::SyntheticBytes(2, 0, 0, 9 * kChunk);
  auto match = c.ShouldCapture("k", "", 0);
  ASSERT_TRUE(match.has_value());
  absl::StatusOr<std::string> id = DoCapture(c, match->arm_id, "k", {big}, {});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(sink_.captures().back().regions[0].bytes, big);
  EXPECT_TRUE(a.ring_bytes() == 0 || b.ring_bytes() == 0);
  EXPECT_LE(watch.Stop(), 11u * kChunk);  // never above the budget
  // Budget is returned when an agent goes.
  clients_.clear();
  ASSERT_TRUE(Eventually([&] { return server_->RingBytesInUse() == 0; }));
}

TEST_F(StagingTest, ACaptureInFlightKeepsItsRing) {
  AgentLinkServerOptions o = Options();
  o.max_total_ring_bytes = 4 * kChunk;  // one ring
  o.ring_reclaim_timeout = absl::Milliseconds(200);
  StartServer(o);
  agent::AgentLinkClient& a = NewLazyClient("app-a");
  ArmKernel("k", /*count=*/2);
  ASSERT_TRUE(WaitRing(a));
  auto ma = a.ShouldCapture("k", "", 0);
  ASSERT_TRUE(ma.has_value());
  CaptureBeginMsg begin;
  begin.arm_id = ma->arm_id;
  begin.demangled_name = "k";
  auto session = a.BeginCapture(begin, "");
  ASSERT_TRUE(session.ok()) << session.error();
  ASSERT_TRUE(WaitEvent([](const v1::Event& e) { return e.has_capture_started(); }));

  agent::AgentLinkClient& b = NewLazyClient("app-b");
  ASSERT_TRUE(b.WaitArms(1, 5000));
  auto mb = b.ShouldCapture("k", "", 0);
  ASSERT_TRUE(mb.has_value());
  std::string data = agent::testing::SyntheticBytes(3, 0, 0, kChunk);
  absl::StatusOr<std::string> id = DoCapture(b, mb->arm_id, "k", {data}, {});
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("--staging-total-gib budget"));
  EXPECT_EQ(a.ring_bytes(), 4u * kChunk);  // untouched
  RegionBeginMsg region;
  region.size = kChunk;
  auto h = (*session)->AddRegion(region);
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE((*session)->WriteRegion(*h, data.data(), data.size()).ok());
  auto ida = (*session)->End();
  ASSERT_TRUE(ida.ok()) << ida.error();
}

TEST_F(StagingTest, EagerAgentBeyondTheBudgetIsRefusedWithTheReason) {
  AgentLinkServerOptions o = Options();
  o.max_total_ring_bytes = 5 * kChunk;  // one ring of 4 slots
  o.max_pinned_ring_share = 1.0;  // eager rings may take it all (BoundsTest has the share)
  StartServer(o);
  RawAgent first = RawAgent::Connect(socket_);
  ASSERT_TRUE(first.ring_fd.valid());
  LinkResult<UniqueFd> fd = ConnectUnix(socket_);
  ASSERT_TRUE(fd.ok());
  HelloMsg h;
  h.pid = 4343;
  ASSERT_TRUE(SendMessage(fd->get(), h).ok());
  LinkResult<Frame> f = RecvFrame(fd->get(), FrameLimits());
  ASSERT_TRUE(f.ok()) << f.error();
  ASSERT_EQ(f->type, MessageType::kError);
  ErrorMsg err;
  ASSERT_TRUE(DecodeBody(*f, &err).ok());
  EXPECT_THAT(err.message, HasSubstr("--staging-total-gib budget of 327680 bytes is in use"));
  EXPECT_EQ(server_->RingBytesInUse(), 4u * kChunk);
}

TEST_F(StagingTest, SkippedDispatchIsReportedAndGivenBack) {
  StartServer();
  agent::AgentLinkClient& client = NewLazyClient();
  ASSERT_TRUE(client.connected());
  v1::ArmInfo arm = ArmKernel("k", /*count=*/1);
  ASSERT_TRUE(client.WaitArms(1, 5000));
  auto first = client.ShouldCapture("k", "", 0);
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(client.armed());  // count 1: used up

  DispatchSkippedMsg msg;
  msg.arm_id = first->arm_id;
  msg.dispatch_index = first->dispatch_index;
  msg.kernel = "k";
  msg.reason = "the launch stream is being captured into a CUDA graph";
  EXPECT_TRUE(client.ReportSkipped(msg, /*give_back=*/true));
  EXPECT_TRUE(client.armed());  // the capture went back to the arm
  auto second = client.ShouldCapture("k", "", 0);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->dispatch_index, 2u);

  std::optional<v1::Event> e = WaitEvent([](const v1::Event& ev) {
    return ev.has_capture_failed() && ev.capture_failed().skipped();
  });
  ASSERT_TRUE(e.has_value());
  const v1::CaptureFailed& f = e->capture_failed();
  EXPECT_EQ(f.arm_id(), arm.arm_id());
  EXPECT_EQ(f.kernel(), "k");
  EXPECT_EQ(f.dispatch_index(), 1u);
  EXPECT_TRUE(f.retried());
  EXPECT_TRUE(f.capture_id().empty());
  EXPECT_THAT(f.reason(), HasSubstr("CUDA graph"));
  EXPECT_EQ(f.agent_id(), client.agent_id());
  // The daemon did not count it: the arm is still active.
  EXPECT_EQ(server_->ListArms(false, RootCaller()).size(), 1u);
}

TEST_F(StagingTest, NthArmsCannotTakeASkippedDispatchBack) {
  StartServer();
  agent::AgentLinkClient& client = NewLazyClient();
  v1::ArmRequest req;
  req.mutable_selector()->set_kernel("k");
  req.mutable_selector()->set_nth(2);
  ASSERT_TRUE(server_->Arm(req, RootCaller()).ok());
  ASSERT_TRUE(client.WaitArms(1, 5000));
  EXPECT_FALSE(client.ShouldCapture("k", "", 0).has_value());
  auto second = client.ShouldCapture("k", "", 0);
  ASSERT_TRUE(second.has_value());
  DispatchSkippedMsg msg;
  msg.arm_id = second->arm_id;
  msg.dispatch_index = second->dispatch_index;
  msg.reason = "gate timeout";
  EXPECT_FALSE(client.ReportSkipped(msg, /*give_back=*/true));
  EXPECT_FALSE(client.armed());
  std::optional<v1::Event> e = WaitEvent([](const v1::Event& ev) {
    return ev.has_capture_failed() && ev.capture_failed().skipped();
  });
  ASSERT_TRUE(e.has_value());
  EXPECT_FALSE(e->capture_failed().retried());
}

TEST_F(StagingTest, RefusedDispatchShowsInTheArmsStatus) {
  StartServer();
  agent::AgentLinkClient& client = NewLazyClient();
  v1::ArmInfo arm = ArmKernel("tex_kernel", /*count=*/1);
  ASSERT_TRUE(client.WaitArms(1, 5000));
  auto taken = client.ShouldCapture("tex_kernel", "", 0);
  ASSERT_TRUE(taken.has_value());
  DispatchSkippedMsg msg;
  msg.arm_id = taken->arm_id;
  msg.dispatch_index = taken->dispatch_index;
  msg.kernel = "tex_kernel";
  msg.reason = "texture/surface objects: the texture object 0x1 reads a CUDA array";
  EXPECT_FALSE(client.ReportSkipped(msg, /*give_back=*/false));

  std::optional<v1::Event> e = WaitEvent([](const v1::Event& ev) {
    return ev.has_arm_changed() && ev.arm_changed().skipped_count() > 0;
  });
  ASSERT_TRUE(e.has_value());
  std::vector<v1::ArmInfo> arms = server_->ListArms(false, RootCaller());
  ASSERT_EQ(arms.size(), 1u);
  EXPECT_EQ(arms[0].arm_id(), arm.arm_id());
  EXPECT_EQ(arms[0].captured(), 0u);
  EXPECT_EQ(arms[0].skipped_count(), 1u);
  ASSERT_EQ(arms[0].skipped_size(), 1);
  const v1::SkippedDispatch& sd = arms[0].skipped(0);
  EXPECT_EQ(sd.kernel(), "tex_kernel");
  EXPECT_EQ(sd.dispatch_index(), 1u);
  EXPECT_FALSE(sd.retried());
  EXPECT_EQ(sd.agent_id(), client.agent_id());
  EXPECT_EQ(sd.pid(), static_cast<uint32_t>(::getpid()));
  EXPECT_THAT(sd.reason(), HasSubstr("CUDA array"));
  EXPECT_GT(sd.unix_ms(), 0);

  // However many an agent reports, the arm keeps the last 16 and counts all.
  for (int i = 0; i < 20; ++i) {
    msg.dispatch_index = 100 + i;
    (void)client.ReportSkipped(msg, /*give_back=*/false);
  }
  auto deadline = absl::Now() + absl::Seconds(5);
  while (server_->ListArms(false, RootCaller())[0].skipped_count() < 21 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  arms = server_->ListArms(false, RootCaller());
  EXPECT_EQ(arms[0].skipped_count(), 21u);
  ASSERT_EQ(arms[0].skipped_size(), 16);
  EXPECT_EQ(arms[0].skipped(15).dispatch_index(), 119u);
  EXPECT_EQ(arms[0].skipped(0).dispatch_index(), 104u);
}

}  // namespace
}  // namespace kerncap::link::testing
