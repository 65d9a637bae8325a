// Tests of AgentLinkServer + AgentLinkClient in one process (and raw protocol
// peers for misbehaviour), with an in-memory recording sink.
#include "daemon/agent_link/agent_link_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "absl/strings/match.h"
#include "agent/link/agent_link_client.h"
#include "agent/testing/synthetic_content.h"
#include "daemon/agent_link/agent_link_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kerncap::link::testing {
namespace {

using ::testing::HasSubstr;

TEST_F(AgentLinkTest, ArmCaptureAndBytesArriveIntact) {
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  ASSERT_TRUE(client.connected()) << client.last_error();
  EXPECT_FALSE(client.armed());
  EXPECT_FALSE(client.ShouldCapture("matmul_bf16", "", 0).has_value());

  v1::ArmInfo arm = ArmKernel("matmul");
  ASSERT_TRUE(client.WaitArms(1, 5000));
  EXPECT_FALSE(client.ShouldCapture("softmax", "_Z7softmaxv", 0).has_value());
  std::optional<agent::ArmMatch> match = client.ShouldCapture("matmul_bf16", "_Z4mmv", 0);
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->arm_id, arm.arm_id());
  EXPECT_EQ(match->dispatch_index, 1u);
  // Count is 1 per process: the next matching dispatch is not captured.
  EXPECT_FALSE(client.ShouldCapture("matmul_bf16", "_Z4mmv", 0).has_value());
  EXPECT_FALSE(client.armed());

  // Region 0: 5 chunks + a partial one (bigger than the 4-slot ring).
  std::string r0 = agent::testing::SyntheticBytes(7, 0, 0, 5 * kChunk + 1000);
  std::string r1 = agent::testing::SyntheticBytes(7, 1, 0, 3000);
  std::string r0_post = agent::testing::SyntheticBytes(7, 0, 1, r0.size());
  absl::StatusOr<std::string> id =
      DoCapture(client, match->arm_id, "matmul_bf16", {r0, r1}, {r0_post});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_THAT(*id, HasSubstr("cap-"));

  std::vector<RecordedCapture> caps = sink_.captures();
  ASSERT_EQ(caps.size(), 1u);
  const RecordedCapture& c = caps[0];
  ASSERT_TRUE(c.committed);
  ASSERT_EQ(c.regions.size(), 3u);
  EXPECT_EQ(c.regions[0].image, ImageKind::kPre);
  EXPECT_TRUE(c.regions[0].bytes == r0);
  EXPECT_TRUE(c.regions[1].bytes == r1);
  EXPECT_EQ(c.regions[2].image, ImageKind::kPost);
  EXPECT_TRUE(c.regions[2].bytes == r0_post);
  EXPECT_EQ(c.regions[0].region.va(), agent::testing::SyntheticVa(0));
  EXPECT_EQ(c.regions[0].region.data().chunk_size(), kChunk);
  ASSERT_EQ(c.code_objects.size(), 1u);
  EXPECT_EQ(c.code_objects[0].first.format(), v1::CODE_OBJECT_CUBIN);
  EXPECT_EQ(c.code_objects[0].second, "CUBIN");
  EXPECT_EQ(c.manifest.capture_id(), *id);
  EXPECT_EQ(c.manifest.kernel().demangled_name(), "matmul_bf16");
  EXPECT_EQ(c.manifest.kernel().platform(), v1::PLATFORM_SYNTHETIC);
  EXPECT_EQ(c.manifest.argument_blob(), "ARGBLOB!");
  EXPECT_EQ(c.manifest.launch().grid_size(), 3);
  EXPECT_EQ(c.manifest.process().pid(), static_cast<uint32_t>(::getpid()));
  EXPECT_EQ(c.manifest.process().process_name(), "test-app");
  EXPECT_EQ(c.manifest.device().name(), "Synthetic Device");
  EXPECT_EQ(c.manifest.arm_id(), arm.arm_id());
  EXPECT_EQ(c.manifest.source(), v1::SOURCE_AGENT);
  EXPECT_TRUE(c.manifest.post_complete());

  // The arm is done after its one capture.
  ASSERT_TRUE(WaitEvent([&](const v1::Event& e) {
    return e.has_arm_changed() && e.arm_changed().state() == v1::ARM_DONE;
  }));
  std::vector<v1::ArmInfo> arms = server_->ListArms(true, RootCaller());
  ASSERT_EQ(arms.size(), 1u);
  EXPECT_EQ(arms[0].captured(), 1u);
  ASSERT_EQ(arms[0].capture_ids_size(), 1);
  EXPECT_EQ(arms[0].capture_ids(0), *id);
  EXPECT_TRUE(server_->ListArms(false, RootCaller()).empty());
  EXPECT_EQ(server_->IngestsInFlight(), 0);
  std::vector<v1::AgentInfo> agents = server_->ListAgents(RootCaller());
  ASSERT_EQ(agents.size(), 1u);
  EXPECT_EQ(agents[0].captures(), 1u);
  EXPECT_EQ(agents[0].agent_id(), client.agent_id());

  // Events, in order of interest.
  bool joined = false, started = false, progress = false, committed = false;
  for (const v1::Event& e : seen_) {
    joined |= e.has_agent_joined();
    started |= e.has_capture_started() && e.capture_started().capture_id() == *id;
    progress |= e.has_capture_progress() && e.capture_progress().capture_id() == *id;
    committed |= e.has_capture_committed() && e.capture_committed().capture_id() == *id &&
                 e.capture_committed().kernel() == "matmul_bf16";
  }
  EXPECT_TRUE(joined && started && progress && committed);
}

TEST_F(AgentLinkTest, SlotsRecycleWhenSinkConsumesAsynchronously) {
  sink_.async_consume = true;
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  ArmKernel("k");
  ASSERT_TRUE(client.WaitArms(1, 5000));
  auto match = client.ShouldCapture("k", "", 0);
  ASSERT_TRUE(match.has_value());
  std::string big = agent::testing::SyntheticBytes(3, 0, 0, 40 * kChunk);  // 10x the ring
  absl::StatusOr<std::string> id = DoCapture(client, match->arm_id, "k", {big}, {});
  ASSERT_TRUE(id.ok()) << id.status();
  std::vector<RecordedCapture> caps = sink_.captures();
  ASSERT_EQ(caps.size(), 1u);
  EXPECT_TRUE(caps[0].regions[0].bytes == big);
}

TEST_F(AgentLinkTest, ArmsActiveAtConnectArriveInWelcome) {
  StartServer();
  v1::ArmRequest req;
  req.mutable_selector()->set_kernel("gemm_.*_tn");
  req.mutable_selector()->set_match(v1::NAME_REGEX);
  req.mutable_selector()->set_skip(1);
  req.mutable_selector()->set_count(2);
  ASSERT_TRUE(server_->Arm(req, RootCaller()).ok());
  v1::ArmRequest other_process;
  other_process.mutable_selector()->set_process_name("not-this-one");
  ASSERT_TRUE(server_->Arm(other_process, RootCaller()).ok());
  agent::AgentLinkClient& client = NewClient();
  ASSERT_TRUE(client.connected());
  EXPECT_EQ(client.active_arms(), 1u);  // the Welcome carried it; the other is filtered
  EXPECT_FALSE(client.ShouldCapture("gemm_bf16_tn", "", 0).has_value());  // skipped
  EXPECT_FALSE(client.ShouldCapture("gemm_bf16_nn", "", 0).has_value());  // no match
  auto m = client.ShouldCapture("gemm_bf16_tn", "", 0);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->dispatch_index, 2u);
  EXPECT_TRUE(client.ShouldCapture("gemm_fp8_tn", "", 0).has_value());
  EXPECT_FALSE(client.ShouldCapture("gemm_fp8_tn", "", 0).has_value());  // count reached
}

TEST_F(AgentLinkTest, ArmValidationDisarmAndExpiry) {
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  v1::ArmRequest bad;
  bad.mutable_selector()->set_kernel("matmul(");
  bad.mutable_selector()->set_match(v1::NAME_REGEX);
  absl::StatusOr<v1::ArmInfo> r = server_->Arm(bad, RootCaller());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("selector.kernel"));

  v1::DisarmRequest none;
  EXPECT_EQ(server_->Disarm(none, RootCaller()).status().code(), absl::StatusCode::kInvalidArgument);
  none.set_arm_id("arm-nope");
  EXPECT_EQ(server_->Disarm(none, RootCaller()).status().code(), absl::StatusCode::kNotFound);

  v1::ArmInfo a = ArmKernel("a");
  ASSERT_TRUE(client.WaitArms(1, 5000));
  v1::DisarmRequest d;
  d.set_arm_id(a.arm_id());
  auto disarmed = server_->Disarm(d, RootCaller());
  ASSERT_TRUE(disarmed.ok());
  ASSERT_EQ(disarmed->size(), 1u);
  EXPECT_EQ((*disarmed)[0].state(), v1::ARM_DISARMED);
  ASSERT_TRUE(Eventually([&] { return client.active_arms() == 0; }));

  v1::ArmRequest ttl;
  ttl.mutable_selector()->set_kernel("b");
  ttl.set_ttl_ms(150);
  auto t = server_->Arm(ttl, RootCaller());
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(WaitEvent([&](const v1::Event& e) {
    return e.has_arm_changed() && e.arm_changed().arm_id() == t->arm_id() &&
           e.arm_changed().state() == v1::ARM_EXPIRED;
  }));
  ASSERT_TRUE(Eventually([&] { return client.active_arms() == 0; }));
  EXPECT_FALSE(client.ShouldCapture("b", "", 0).has_value());
  EXPECT_EQ(server_->ListArms(true, RootCaller()).size(), 2u);
  EXPECT_TRUE(server_->ListArms(false, RootCaller()).empty());

  v1::ArmRequest past;
  past.set_expires_unix_ms(1000);
  EXPECT_FALSE(server_->Arm(past, RootCaller()).ok());
}

TEST_F(AgentLinkTest, CountIsEnforcedAcrossAgents) {
  StartServer();
  agent::AgentLinkClient& a = NewClient("app-a");
  agent::AgentLinkClient& b = NewClient("app-b");
  v1::ArmInfo arm = ArmKernel("k", /*count=*/1);
  ASSERT_TRUE(a.WaitArms(1, 5000) && b.WaitArms(1, 5000));
  ASSERT_TRUE(a.ShouldCapture("k", "", 0).has_value());
  ASSERT_TRUE(b.ShouldCapture("k", "", 0).has_value());
  CaptureBeginMsg begin;
  begin.arm_id = arm.arm_id();
  begin.demangled_name = "k";
  auto sa = a.BeginCapture(begin, "");
  ASSERT_TRUE(sa.ok());
  // A's CaptureBegin reserves the arm's only capture; make sure the daemon
  // has processed it before B begins.
  ASSERT_TRUE(WaitEvent([](const v1::Event& e) { return e.has_capture_started(); }));
  auto sb = b.BeginCapture(begin, "");
  ASSERT_TRUE(sb.ok());
  auto idb = (*sb)->End();
  ASSERT_FALSE(idb.ok());
  EXPECT_THAT(idb.error(), HasSubstr("already has its captures"));
  auto ida = (*sa)->End();
  ASSERT_TRUE(ida.ok()) << ida.error();
  EXPECT_EQ(server_->ListArms(true, RootCaller())[0].state(), v1::ARM_DONE);
}

TEST_F(AgentLinkTest, SinkFailureFailsCaptureButKeepsAgent) {
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  sink_.fail_add_region = 1;
  std::string data(kChunk, 'x');
  const std::string arm = ArmKernel("k", /*count=*/2).arm_id();
  absl::StatusOr<std::string> id = DoCapture(client, arm, "k", {data}, {});
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("disk full"));
  ASSERT_TRUE(WaitEvent([](const v1::Event& e) { return e.has_capture_failed(); }));
  EXPECT_TRUE(client.connected());
  id = DoCapture(client, arm, "k", {data}, {});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(server_->IngestsInFlight(), 0);
}

TEST_F(AgentLinkTest, AgentDisconnectMidCaptureAbortsIngest) {
  StartServer();
  {
    RawAgent raw = RawAgent::Connect(socket_);
    ASSERT_EQ(raw.welcome.slot_count, 4u);
    ASSERT_TRUE(raw.ring_fd.valid());
    raw.Begin(1, 3 * kChunk, ArmKernel("raw_kernel").arm_id());
    SlotFilledMsg filled;
    filled.token = 1;
    filled.slot = 0;
    filled.length = kChunk;
    ASSERT_TRUE(SendMessage(raw.fd.get(), filled).ok());
    ASSERT_TRUE(WaitEvent([](const v1::Event& e) { return e.has_capture_progress(); }));
    EXPECT_EQ(server_->IngestsInFlight(), 1);
  }  // closes the socket mid-capture
  ASSERT_TRUE(WaitEvent([](const v1::Event& e) { return e.has_agent_left(); }));
  bool failed = false;
  for (const v1::Event& e : seen_) {
    failed |= e.has_capture_failed() &&
              absl::StartsWith(e.capture_failed().reason(), "agent disconnected");
  }
  EXPECT_TRUE(failed);
  std::vector<RecordedCapture> caps = sink_.captures();
  ASSERT_EQ(caps.size(), 1u);
  EXPECT_TRUE(caps[0].aborted);
  EXPECT_FALSE(caps[0].committed);
  EXPECT_EQ(server_->IngestsInFlight(), 0);
  EXPECT_TRUE(server_->ListAgents(RootCaller()).empty());
}

TEST_F(AgentLinkTest, MisbehavingAgentsAreDroppedOthersKeepWorking) {
  StartServer();
  agent::AgentLinkClient& good = NewClient();
  const std::string arm = ArmKernel("raw_kernel", /*count=*/100).arm_id();
  struct Case {
    const char* name;
    std::function<void(RawAgent&)> misbehave;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"bad magic",
       [](RawAgent& a) { ASSERT_EQ(::write(a.fd.get(), "GARBAGE-GARBAGE-GARBAGE!", 24), 24); },
       "magic"},
      {"absurd json length",
       [](RawAgent& a) {
         FrameHeader h;
         h.type = static_cast<uint16_t>(MessageType::kCaptureBegin);
         h.json_length = 0x7FFFFFFF;
         uint8_t buf[kFrameHeaderSize];
         EncodeFrameHeader(h, buf);
         ASSERT_EQ(::write(a.fd.get(), buf, sizeof(buf)), 24);
       },
       "json length"},
      {"slot out of range",
       [&](RawAgent& a) {
         a.Begin(1, kChunk, arm);
         SlotFilledMsg m;
         m.token = 1;
         m.slot = 99;
         m.length = kChunk;
         ASSERT_TRUE(SendMessage(a.fd.get(), m).ok());
       },
       "out of range"},
      {"region overflow",
       [&](RawAgent& a) {
         a.Begin(1, kChunk, arm);
         SlotFilledMsg m;
         m.token = 1;
         m.offset = kChunk;
         m.length = kChunk;
         ASSERT_TRUE(SendMessage(a.fd.get(), m).ok());
       },
       "overflows"},
      {"slot reused while daemon holds it",
       [&](RawAgent& a) {
         sink_.hold_consumed = true;
         a.Begin(1, 4 * kChunk, arm);
         SlotFilledMsg m;
         m.token = 1;
         m.length = kChunk;
         ASSERT_TRUE(SendMessage(a.fd.get(), m).ok());
         m.offset = kChunk;
         ASSERT_TRUE(SendMessage(a.fd.get(), m).ok());  // no SlotFree in between
       },
       "while the daemon still holds it"},
      {"region before capture",
       [](RawAgent& a) {
         RegionBeginMsg r;
         r.token = 5;
         r.size = 10;
         ASSERT_TRUE(SendMessage(a.fd.get(), r).ok());
       },
       "without CaptureBegin"},
      {"pre after post",
       [&](RawAgent& a) {
         a.Begin(1, kChunk, arm);
         RegionBeginMsg r;
         r.token = 1;
         r.region = 1;
         r.image = ImageKind::kPost;
         r.size = kChunk;
         ASSERT_TRUE(SendMessage(a.fd.get(), r).ok());
         r.region = 2;
         r.image = ImageKind::kPre;
         ASSERT_TRUE(SendMessage(a.fd.get(), r).ok());
       },
       "pre-image region after"},
      {"unaligned write",
       [&](RawAgent& a) {
         a.Begin(1, 4 * kChunk, arm);
         SlotFilledMsg m;
         m.token = 1;
         m.offset = 100;
         m.length = 100;
         ASSERT_TRUE(SendMessage(a.fd.get(), m).ok());
       },
       "not aligned"},
      {"daemon-only message",
       [](RawAgent& a) {
         WelcomeMsg w;
         ASSERT_TRUE(SendMessage(a.fd.get(), w).ok());
       },
       "unexpected Welcome"},
  };
  for (Case& c : cases) {
    SCOPED_TRACE(c.name);
    RawAgent raw = RawAgent::Connect(socket_);
    c.misbehave(raw);
    std::string message;
    EXPECT_TRUE(raw.Dropped(&message));
    EXPECT_THAT(message, HasSubstr(c.expect));
    sink_.hold_consumed = false;
    sink_.ReleaseHeld();
  }
  // Nothing half-visible, nothing leaked, and the well-behaved agent works.
  ASSERT_TRUE(Eventually([&] { return server_->ListAgents(RootCaller()).size() == 1; }));
  EXPECT_EQ(server_->IngestsInFlight(), 0);
  for (const RecordedCapture& c : sink_.captures()) EXPECT_FALSE(c.committed);
  std::string data = agent::testing::SyntheticBytes(1, 0, 0, 2 * kChunk);
  absl::StatusOr<std::string> id = DoCapture(good, ArmKernel("k").arm_id(), "k", {data}, {});
  ASSERT_TRUE(id.ok()) << id.status();
}

TEST_F(AgentLinkTest, HelloMustComeFirst) {
  AgentLinkServerOptions o = Options();
  o.hello_timeout = absl::Milliseconds(100);
  StartServer(o);
  RawAgent silent = RawAgent::Connect(socket_, /*hello=*/false);
  EXPECT_TRUE(silent.Dropped());  // handshake timeout
  RawAgent wrong = RawAgent::Connect(socket_, /*hello=*/false);
  SlotFreeMsg m;
  ASSERT_TRUE(SendMessage(wrong.fd.get(), m).ok());
  std::string message;
  EXPECT_TRUE(wrong.Dropped(&message));
  EXPECT_THAT(message, HasSubstr("expected Hello"));
}

TEST_F(AgentLinkTest, RingIsSealedAgainstResizeByAgent) {
  StartServer();
  RawAgent raw = RawAgent::Connect(socket_);
  ASSERT_TRUE(raw.ring_fd.valid());
  EXPECT_TRUE(CheckRingFd(raw.ring_fd.get(), {raw.welcome.slot_size, raw.welcome.slot_count}).ok());
  EXPECT_NE(::ftruncate(raw.ring_fd.get(), 0), 0);
  EXPECT_NE(::ftruncate(raw.ring_fd.get(), 1 << 30), 0);
}

TEST_F(AgentLinkTest, DaemonAbsentClientNoOps) {
  agent::AgentLinkClientOptions o;
  o.socket_path = dir_ + "/nobody.sock";
  o.initial_wait_ms = 2000;
  agent::AgentLinkClient client(o);
  auto start = std::chrono::steady_clock::now();
  client.Start();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_FALSE(client.connected());
  EXPECT_FALSE(client.ShouldCapture("anything", "", 0).has_value());
  CaptureBeginMsg begin;
  auto s = client.BeginCapture(begin, "", 100);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(client.last_error().empty());
  client.Stop();
}

TEST_F(AgentLinkTest, DaemonRestartClientReconnects) {
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  ASSERT_TRUE(client.connected());
  std::string first_id = client.agent_id();
  uint64_t gen = client.connection_generation();
  ArmKernel("k");
  ASSERT_TRUE(client.WaitArms(1, 5000));

  server_->Shutdown(true);
  server_.reset();
  ASSERT_TRUE(Eventually([&] { return !client.connected(); }));
  EXPECT_FALSE(client.armed());  // no daemon, no arms

  StartServer();
  ASSERT_TRUE(client.WaitConnected(gen, 10000)) << client.last_error();
  EXPECT_NE(client.agent_id(), first_id);
  ASSERT_EQ(server_->ListAgents(RootCaller()).size(), 1u);
  v1::ArmInfo arm = ArmKernel("k");
  ASSERT_TRUE(client.WaitArms(1, 5000));
  auto m = client.ShouldCapture("k", "", 0);
  ASSERT_TRUE(m.has_value());
  std::string data(kChunk, 'z');
  ASSERT_TRUE(DoCapture(client, arm.arm_id(), "k", {data}, {}).ok());
}

TEST_F(AgentLinkTest, StaleSocketIsReplacedLiveOneRefused) {
  // A socket file nobody listens on (a crashed daemon's leftover).
  {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, socket_.c_str());
    ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  }
  StartServer();
  struct stat st;
  ASSERT_EQ(::stat(socket_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  AgentLinkServer second;
  absl::Status s = second.Start(Options(), sink_, bus_);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  second.Shutdown(true);
  EXPECT_EQ(::stat(socket_.c_str(), &st), 0);  // the live daemon's socket survives
}

TEST_F(AgentLinkTest, ShutdownDiscardAbortsInFlightCapture) {
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  CaptureBeginMsg begin;
  begin.arm_id = ArmKernel("k").arm_id();
  begin.demangled_name = "k";
  auto s = client.BeginCapture(begin, "");
  ASSERT_TRUE(s.ok());
  RegionBeginMsg r;
  r.size = kChunk;
  ASSERT_TRUE((*s)->AddRegion(r).ok());
  ASSERT_TRUE(Eventually([&] { return server_->IngestsInFlight() == 1; }));
  server_->Shutdown(/*discard_in_flight=*/true);
  auto id = (*s)->End(true, 5000);
  EXPECT_FALSE(id.ok());
  std::vector<RecordedCapture> caps = sink_.captures();
  ASSERT_EQ(caps.size(), 1u);
  EXPECT_TRUE(caps[0].aborted);
  EXPECT_EQ(server_->IngestsInFlight(), 0);
}

TEST_F(AgentLinkTest, GraphOriginOfAKernelNodeReachesTheManifest) {
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  ASSERT_TRUE(client.connected()) << client.last_error();
  v1::ArmInfo arm = ArmKernel("step");
  ASSERT_TRUE(client.WaitArms(1, 5000));
  auto match = client.ShouldCapture("step", "", 0);
  ASSERT_TRUE(match.has_value());
  GraphOriginInfo g;
  g.present = true;
  g.graph_exec = 0x7000;
  g.graph = 0x6000;
  g.exec_serial = 3;
  g.graph_launch = 5;
  g.node_index = 7;
  g.node_count = 12;
  g.node_path = "4/1";
  g.node = 0x5000;
  g.instantiate_flags = 8;
  auto id = DoCapture(client, match->arm_id, "step", {std::string(100, 'a')}, {}, g);
  ASSERT_TRUE(id.ok()) << id.status();
  std::vector<RecordedCapture> caps = sink_.captures();
  ASSERT_EQ(caps.size(), 1u);
  ASSERT_TRUE(caps[0].manifest.has_graph());
  const v1::GraphOrigin& o = caps[0].manifest.graph();
  EXPECT_EQ(o.graph_exec(), 0x7000u);
  EXPECT_EQ(o.graph(), 0x6000u);
  EXPECT_EQ(o.exec_serial(), 3u);
  EXPECT_EQ(o.graph_launch(), 5u);
  EXPECT_EQ(o.node_index(), 7u);
  EXPECT_EQ(o.node_count(), 12u);
  EXPECT_EQ(o.node_path(), "4/1");
  EXPECT_EQ(o.node(), 0x5000u);
  EXPECT_EQ(o.instantiate_flags(), 8u);
}

TEST_F(AgentLinkTest, DirectLaunchHasNoGraphOrigin) {
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  ASSERT_TRUE(client.connected()) << client.last_error();
  ArmKernel("k");
  ASSERT_TRUE(client.WaitArms(1, 5000));
  auto match = client.ShouldCapture("k", "", 0);
  ASSERT_TRUE(match.has_value());
  ASSERT_TRUE(DoCapture(client, match->arm_id, "k", {std::string(10, 'a')}, {}).ok());
  ASSERT_EQ(sink_.captures().size(), 1u);
  EXPECT_FALSE(sink_.captures()[0].manifest.has_graph());
}

TEST_F(AgentLinkTest, ImplausibleGraphOriginFailsTheCaptureWithTheReason) {
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  ASSERT_TRUE(client.connected()) << client.last_error();
  ArmKernel("step", /*count=*/8);
  ASSERT_TRUE(client.WaitArms(1, 5000));
  struct Bad {
    uint32_t index, count;
    std::string path;
    const char* why;
  };
  for (const Bad& b : {Bad{12, 12, "1", "not below node_count"}, Bad{0, 0, "1", "node_count 0"},
                       Bad{0, 3, "1//2", "indices joined"}, Bad{0, 3, "a", "indices joined"},
                       Bad{0, 3, std::string(300, '1'), "characters"}}) {
    auto match = client.ShouldCapture("step", "", 0);
    ASSERT_TRUE(match.has_value());
    GraphOriginInfo g;
    g.present = true;
    g.node_index = b.index;
    g.node_count = b.count;
    g.node_path = b.path;
    auto id = DoCapture(client, match->arm_id, "step", {std::string(10, 'a')}, {}, g);
    ASSERT_FALSE(id.ok()) << b.path;
    EXPECT_THAT(std::string(id.status().message()), HasSubstr("graph origin")) << b.path;
    EXPECT_THAT(std::string(id.status().message()), HasSubstr(b.why)) << b.path;
  }
  EXPECT_TRUE(sink_.captures().empty());
}

TEST_F(AgentLinkTest, ArmsMatchingNamesArmsWithoutCountingTheDispatch) {
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  ASSERT_TRUE(client.connected()) << client.last_error();
  EXPECT_TRUE(client.ArmsMatching("step", "", 0).empty());
  v1::ArmInfo arm = ArmKernel("step");
  ASSERT_TRUE(client.WaitArms(1, 5000));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(client.ArmsMatching("step(float*)", "", 0), std::vector<std::string>{arm.arm_id()});
  }
  EXPECT_TRUE(client.ArmsMatching("norm", "", 0).empty());
  auto match = client.ShouldCapture("step(float*)", "", 0);
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->dispatch_index, 1u);  // the three questions were not dispatches
  EXPECT_TRUE(client.ArmsMatching("step(float*)", "", 0).empty());  // used up
}

}  // namespace
}  // namespace kerncap::link::testing
