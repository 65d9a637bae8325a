// The kernel census over the agent link: AgentLinkServer::ListKernels asks
// each matching agent (real AgentLinkClients answering from their
// list_kernels hook, and raw peers that misbehave) for every page of its
// loaded kernels.
#include <memory>
#include <string>
#include <vector>

#include "agent/link/agent_link_client.h"
#include "daemon/agent_link/agent_link_server.h"
#include "daemon/agent_link/agent_link_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kerncap::link::testing {
namespace {

using ::testing::HasSubstr;

class CensusTest : public AgentLinkTest {
 protected:
  // A client whose agent has loaded `kernel_count` kernels k0, k1, ...
  agent::AgentLinkClient& NewCensusClient(const std::string& process_name, size_t kernel_count) {
    agent::AgentLinkClientOptions o;
    o.socket_path = socket_;
    o.identity.process_name = process_name;
    o.identity.platform = Platform::kSynthetic;
    o.retry_initial_ms = 10;
    o.retry_max_ms = 50;
    o.initial_wait_ms = 2000;
    o.list_kernels = [kernel_count] {
      std::vector<LoadedKernelInfo> out;
      for (size_t i = 0; i < kernel_count; ++i) {
        LoadedKernelInfo k;
        k.mangled_name = "_Z1k" + std::to_string(i) + "v";
        k.demangled_name = "k" + std::to_string(i) + "()";
        k.module = "cuda-module-" + std::to_string(i / 1000);
        out.push_back(std::move(k));
      }
      return out;
    };
    clients_.push_back(std::make_unique<agent::AgentLinkClient>(o));
    clients_.back()->Start();
    return *clients_.back();
  }

  void WaitAgents(size_t n) {
    for (int i = 0; i < 500 && server_->ListAgents().size() < n; ++i) absl::SleepFor(absl::Milliseconds(10));
    ASSERT_EQ(server_->ListAgents().size(), n);
  }

  static const v1::AgentKernels* ByProcess(const v1::ListKernelsResponse& r,
                                           const std::string& process_name) {
    for (const v1::AgentKernels& a : r.agents()) {
      if (a.agent().process().process_name() == process_name) return &a;
    }
    return nullptr;
  }
};

TEST_F(CensusTest, ListsEveryPageOfEachMatchingAgentAndSaysWhoCannotAnswer) {
  StartServer();
  // 25000 kernels: three pages of at most kMaxReportedKernels.
  NewCensusClient("census-app", 25000);
  NewClient("old-app");  // an agent without the census
  WaitAgents(2);

  v1::ListKernelsResponse all = server_->ListKernels(v1::ListKernelsRequest());
  ASSERT_EQ(all.agents_size(), 2);
  const v1::AgentKernels* census = ByProcess(all, "census-app");
  ASSERT_NE(census, nullptr);
  EXPECT_EQ(census->error(), "");
  ASSERT_EQ(census->kernels_size(), 25000);
  EXPECT_EQ(census->left_out(), 0u);
  for (int i = 0; i < 25000; i += 4999) {
    EXPECT_EQ(census->kernels(i).mangled_name(), "_Z1k" + std::to_string(i) + "v");
    EXPECT_EQ(census->kernels(i).demangled_name(), "k" + std::to_string(i) + "()");
    EXPECT_EQ(census->kernels(i).module(), "cuda-module-" + std::to_string(i / 1000));
  }
  const v1::AgentKernels* old = ByProcess(all, "old-app");
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(old->kernels_size(), 0);
  EXPECT_THAT(old->error(), HasSubstr("does not offer the kernel census"));

  // Filters: by process name (substring, as selectors), by agent id.
  v1::ListKernelsRequest by_name;
  by_name.set_process_name("census");
  v1::ListKernelsResponse named = server_->ListKernels(by_name);
  ASSERT_EQ(named.agents_size(), 1);
  EXPECT_EQ(named.agents(0).agent().process().process_name(), "census-app");
  v1::ListKernelsRequest by_id;
  by_id.set_agent_id(old->agent().agent_id());
  v1::ListKernelsResponse one = server_->ListKernels(by_id);
  ASSERT_EQ(one.agents_size(), 1);
  EXPECT_EQ(one.agents(0).agent().agent_id(), old->agent().agent_id());
  v1::ListKernelsRequest nobody;
  nobody.set_pid(1);  // init has no agent
  EXPECT_EQ(server_->ListKernels(nobody).agents_size(), 0);
}

TEST_F(CensusTest, KeepsAtMostTheCapAndCountsTheRestAsLeftOut) {
  AgentLinkServerOptions o = Options();
  o.max_census_kernels = 100;
  StartServer(o);
  NewCensusClient("census-app", 12000);
  WaitAgents(1);
  v1::ListKernelsResponse r = server_->ListKernels(v1::ListKernelsRequest());
  ASSERT_EQ(r.agents_size(), 1);
  EXPECT_EQ(r.max_kernels_per_agent(), 100u);
  EXPECT_EQ(r.agents(0).kernels_size(), 100);
  EXPECT_EQ(r.agents(0).left_out(), 11900u);
}

// A raw peer that offers the census and answers KernelsRequests with `reply`.
struct RawCensusAgent {
  UniqueFd fd;
  static RawCensusAgent Connect(const std::string& path) {
    RawCensusAgent a;
    LinkResult<UniqueFd> fd = ConnectUnix(path);
    EXPECT_TRUE(fd.ok());
    if (!fd.ok()) return a;
    a.fd = std::move(fd).value();
    HelloMsg h;
    h.pid = 4243;
    h.process_name = "raw-census";
    h.features = {kFeatureKernelCensus, kFeatureLazyRing};
    EXPECT_TRUE(SendMessage(a.fd.get(), h).ok());
    LinkResult<Frame> f = RecvFrame(a.fd.get(), FrameLimits());
    EXPECT_TRUE(f.ok());
    WelcomeMsg w;
    if (f.ok()) {
      EXPECT_TRUE(DecodeBody(*f, &w).ok());
    }
    EXPECT_TRUE(HasFeature(w.features, kFeatureKernelCensus));
    return a;
  }
  // Answers the next KernelsRequest with `reply` (request id and offset
  // filled in); false when the daemon dropped us first.
  bool Answer(KernelsReportMsg reply) {
    while (true) {
      LinkResult<Frame> f = RecvFrame(fd.get(), FrameLimits());
      if (!f.ok()) return false;
      if (f->type != MessageType::kKernelsRequest) continue;
      KernelsRequestMsg req;
      if (!DecodeBody(*f, &req).ok()) return false;
      reply.request_id = req.request_id;
      reply.offset = req.offset;
      return SendMessage(fd.get(), reply).ok();
    }
  }
};

TEST_F(CensusTest, APageThatDoesNotMoveForwardDropsTheAgentAndTheCensusSaysSo) {
  StartServer();
  RawCensusAgent raw = RawCensusAgent::Connect(socket_);
  WaitAgents(1);
  std::thread agent([&] {
    // The first page (offset 0) is fine and says the next starts at 1; the
    // second (offset 1) says the next starts at 1 again: a census that
    // would never end.
    KernelsReportMsg page;
    page.kernels.push_back({"_Z1av", "a()", "m"});
    page.total = 5;
    page.next_offset = 1;
    EXPECT_TRUE(raw.Answer(page));
    raw.Answer(page);
  });
  v1::ListKernelsResponse r = server_->ListKernels(v1::ListKernelsRequest());
  agent.join();
  ASSERT_EQ(r.agents_size(), 1);
  EXPECT_EQ(r.agents(0).kernels_size(), 0);
  EXPECT_THAT(r.agents(0).error(), HasSubstr("disconnected"));
  for (int i = 0; i < 500 && !server_->ListAgents().empty(); ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_TRUE(server_->ListAgents().empty()) << "the agent broke the protocol: it is dropped";
}

TEST_F(CensusTest, AnAgentThatDoesNotAnswerTimesOutWithoutHoldingTheOthers) {
  AgentLinkServerOptions o = Options();
  o.census_timeout = absl::Milliseconds(300);
  StartServer(o);
  RawCensusAgent silent = RawCensusAgent::Connect(socket_);  // never answers
  NewCensusClient("census-app", 3);
  WaitAgents(2);
  absl::Time start = absl::Now();
  v1::ListKernelsResponse r = server_->ListKernels(v1::ListKernelsRequest());
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  ASSERT_EQ(r.agents_size(), 2);
  const v1::AgentKernels* quiet = ByProcess(r, "raw-census");
  ASSERT_NE(quiet, nullptr);
  EXPECT_THAT(quiet->error(), HasSubstr("did not answer the kernel census within"));
  const v1::AgentKernels* good = ByProcess(r, "census-app");
  ASSERT_NE(good, nullptr);
  EXPECT_EQ(good->kernels_size(), 3);
  // A late answer to the abandoned request is dropped, not taken for the next.
  KernelsReportMsg late;
  late.request_id = 1;
  late.kernels.push_back({"_Z4latev", "late()", "m"});
  EXPECT_TRUE(SendMessage(silent.fd.get(), late).ok());
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(server_->ListAgents().size(), 2u);
}

}  // namespace
}  // namespace kerncap::link::testing
