// The kernel census over the agent link: AgentLinkServer::ListKernels asks
// each matching agent (real AgentLinkClients answering from their
// list_kernels hook, and raw peers that misbehave) for every page of its
// loaded kernels.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/link/agent_link_client.h"
#include "agent/link/launch_sampler.h"
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
    agent::AgentLinkClientOptions o = ClientOptions(process_name);
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
    return StartClient(o);
  }

  void WaitAgents(size_t n) {
    for (int i = 0; i < 500 && server_->ListAgents(RootCaller()).size() < n; ++i) absl::SleepFor(absl::Milliseconds(10));
    ASSERT_EQ(server_->ListAgents(RootCaller()).size(), n);
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

  v1::ListKernelsResponse all = server_->ListKernels(v1::ListKernelsRequest(), RootCaller());
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
  v1::ListKernelsResponse named = server_->ListKernels(by_name, RootCaller());
  ASSERT_EQ(named.agents_size(), 1);
  EXPECT_EQ(named.agents(0).agent().process().process_name(), "census-app");
  v1::ListKernelsRequest by_id;
  by_id.set_agent_id(old->agent().agent_id());
  v1::ListKernelsResponse one = server_->ListKernels(by_id, RootCaller());
  ASSERT_EQ(one.agents_size(), 1);
  EXPECT_EQ(one.agents(0).agent().agent_id(), old->agent().agent_id());
  v1::ListKernelsRequest nobody;
  nobody.set_pid(1);  // init has no agent
  EXPECT_EQ(server_->ListKernels(nobody, RootCaller()).agents_size(), 0);
}

TEST_F(CensusTest, KeepsAtMostTheCapAndCountsTheRestAsLeftOut) {
  AgentLinkServerOptions o = Options();
  o.max_census_kernels = 100;
  StartServer(o);
  NewCensusClient("census-app", 12000);
  WaitAgents(1);
  v1::ListKernelsResponse r = server_->ListKernels(v1::ListKernelsRequest(), RootCaller());
  ASSERT_EQ(r.agents_size(), 1);
  EXPECT_EQ(r.max_kernels_per_agent(), 100u);
  EXPECT_EQ(r.agents(0).kernels_size(), 100);
  EXPECT_EQ(r.agents(0).left_out(), 11900u);
}

// A raw peer (not an AgentLinkClient) that offers `features` and answers
// the daemon's requests however a test wants, within the protocol or not.
struct RawAgent {
  UniqueFd fd;
  static RawAgent Connect(const std::string& path, std::vector<std::string> features,
                          const std::string& process_name, uint32_t pid) {
    RawAgent a;
    LinkResult<UniqueFd> fd = ConnectUnix(path);
    EXPECT_TRUE(fd.ok());
    if (!fd.ok()) return a;
    a.fd = std::move(fd).value();
    HelloMsg h;
    h.pid = pid;
    h.process_name = process_name;
    h.features = features;
    EXPECT_TRUE(SendMessage(a.fd.get(), h).ok());
    LinkResult<Frame> f = RecvFrame(a.fd.get(), FrameLimits());
    EXPECT_TRUE(f.ok());
    WelcomeMsg w;
    if (f.ok()) {
      EXPECT_TRUE(DecodeBody(*f, &w).ok());
    }
    for (const std::string& feature : features) EXPECT_TRUE(HasFeature(w.features, feature));
    return a;
  }
  // Answers the next `Request` with `reply`, `fill` copying what the reply
  // must echo from the request; false when the daemon dropped us first.
  template <typename Request, typename Reply, typename Fill>
  bool Answer(Reply reply, const Fill& fill) {
    while (true) {
      LinkResult<Frame> f = RecvFrame(fd.get(), FrameLimits());
      if (!f.ok()) return false;
      if (f->type != Request::kType) continue;
      Request req;
      if (!DecodeBody(*f, &req).ok()) return false;
      fill(req, reply);
      return SendMessage(fd.get(), reply).ok();
    }
  }
};

// The census's raw peer: answers KernelsRequests (request id and offset
// filled in).
struct RawCensusAgent {
  RawAgent raw;
  static RawCensusAgent Connect(const std::string& path) {
    return {RawAgent::Connect(path, {kFeatureKernelCensus, kFeatureLazyRing}, "raw-census", 4243)};
  }
  bool Answer(KernelsReportMsg reply) {
    return raw.Answer<KernelsRequestMsg>(reply, [](const KernelsRequestMsg& req,
                                                   KernelsReportMsg& r) {
      r.request_id = req.request_id;
      r.offset = req.offset;
    });
  }
};

// Issue 28: one agent filled a census with 363 MiB and the call failed for
// everyone. Bytes are bounded per agent and for the whole answer; a census
// cut short says so on its agent, and the others are whole.
TEST_F(CensusTest, BytesAreBoundedPerAgentAndInAllAndATruncatedAnswerSaysSo) {
  AgentLinkServerOptions o = Options();
  o.max_census_bytes_per_agent = 1u << 20;
  o.max_census_total_bytes = 3u << 19;  // 1.5 MiB for all agents
  StartServer(o);
  // A hostile agent: 5000 kernels with 8 KiB names (80 MB uncapped).
  agent::AgentLinkClientOptions big = ClientOptions("flooder");
  big.list_kernels = [] {
    std::vector<LoadedKernelInfo> out;
    for (int i = 0; i < 5000; ++i) {
      LoadedKernelInfo k;
      k.mangled_name = "_Z" + std::to_string(i) + std::string(4000, 'x');
      k.demangled_name = std::string(4000, 'y') + std::to_string(i);
      k.module = "m";
      out.push_back(std::move(k));
    }
    return out;
  };
  StartClient(big);
  NewCensusClient("census-app", 100);
  WaitAgents(2);
  v1::ListKernelsResponse r = server_->ListKernels(v1::ListKernelsRequest(), RootCaller());
  EXPECT_EQ(r.max_bytes_per_agent(), 1u << 20);
  EXPECT_EQ(r.max_total_bytes(), 3u << 19);
  const v1::AgentKernels* flooder = ByProcess(r, "flooder");
  const v1::AgentKernels* good = ByProcess(r, "census-app");
  ASSERT_NE(flooder, nullptr);
  ASSERT_NE(good, nullptr);
  EXPECT_EQ(flooder->error(), "");
  EXPECT_THAT(flooder->truncated(), HasSubstr("--census-mib-per-agent"));
  uint64_t bytes = 0;
  for (const v1::LoadedKernel& k : flooder->kernels()) {
    bytes += k.mangled_name().size() + k.demangled_name().size() + k.module().size();
  }
  EXPECT_LE(bytes, 1u << 20);
  EXPECT_GT(flooder->kernels_size(), 100);
  EXPECT_EQ(flooder->kernels_size() + flooder->left_out(), 5000u);
  EXPECT_EQ(good->truncated(), "");
  EXPECT_EQ(good->kernels_size(), 100);
  EXPECT_EQ(r.ByteSizeLong() < (2u << 20), true) << r.ByteSizeLong();

  // The answer's own bound: two floods of 1 MiB each do not both fit in 1.5.
  StartClient(big).WaitConnected(0, 2000);
  WaitAgents(3);
  v1::ListKernelsResponse two = server_->ListKernels(v1::ListKernelsRequest(), RootCaller());
  int cut_by_total = 0;
  uint64_t kept = 0;
  for (const v1::AgentKernels& a : two.agents()) {
    if (a.truncated().find("all agents together") != std::string::npos) ++cut_by_total;
    for (const v1::LoadedKernel& k : a.kernels()) {
      kept += k.mangled_name().size() + k.demangled_name().size() + k.module().size();
    }
  }
  EXPECT_GE(cut_by_total, 1);
  EXPECT_LE(kept, 3u << 19);
}

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
  v1::ListKernelsResponse r = server_->ListKernels(v1::ListKernelsRequest(), RootCaller());
  agent.join();
  ASSERT_EQ(r.agents_size(), 1);
  EXPECT_EQ(r.agents(0).kernels_size(), 0);
  EXPECT_THAT(r.agents(0).error(), HasSubstr("disconnected"));
  for (int i = 0; i < 500 && !server_->ListAgents(RootCaller()).empty(); ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_TRUE(server_->ListAgents(RootCaller()).empty()) << "the agent broke the protocol: it is dropped";
}

TEST_F(CensusTest, AnAgentThatDoesNotAnswerTimesOutWithoutHoldingTheOthers) {
  AgentLinkServerOptions o = Options();
  o.census_timeout = absl::Milliseconds(300);
  StartServer(o);
  RawCensusAgent silent = RawCensusAgent::Connect(socket_);  // never answers
  NewCensusClient("census-app", 3);
  WaitAgents(2);
  absl::Time start = absl::Now();
  v1::ListKernelsResponse r = server_->ListKernels(v1::ListKernelsRequest(), RootCaller());
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
  EXPECT_TRUE(SendMessage(silent.raw.fd.get(), late).ok());
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(server_->ListAgents(RootCaller()).size(), 2u);
}

// Launch sampling ("launch_sample"): the daemon starts every matching
// agent's sample at once, stops it after sample_ms and puts the counts on the
// census entries.
class SampleTest : public CensusTest {
 protected:
  agent::AgentLinkClient& NewSamplingClient(const std::string& process_name,
                                            agent::LaunchSampler* sampler) {
    agent::AgentLinkClientOptions o = ClientOptions(process_name);
    o.list_kernels = [] {
      std::vector<LoadedKernelInfo> out = {{"_Z6matmulv", "matmul()", "cuda-module-1"},
                                           {"_Z6matmulv", "matmul()", "cuda-module-2"},
                                           {"_Z4idlev", "idle()", "cuda-module-1"}};
      return out;
    };
    o.launch_sampler = sampler;
    return StartClient(o);
  }
  // Outlives the clients (TearDown stops them first), as the client's
  // options require.
  agent::LaunchSampler sampler_;
};

SampledConfig Grid(uint32_t x) {
  SampledConfig c;
  c.grid = {x, 1, 1};
  c.block = {128, 1, 1};
  return c;
}

TEST_F(SampleTest, CountsEachKernelsLaunchesAndShapesOnItsCensusEntry) {
  StartServer();
  agent::LaunchSampler& sampler = sampler_;
  NewSamplingClient("sampled-app", &sampler);
  NewCensusClient("census-only-app", 2);  // offers the census, not sampling
  WaitAgents(2);
  // The application launches while the sample runs.
  std::atomic<bool> done{false};
  std::thread app([&] {
    int launched = 0;
    while (!done.load()) {
      if (sampler.active() && launched < 30) {
        sampler.Record("_Z6matmulv", "matmul()", Grid(launched % 3 + 1), launched % 2);
        if (launched < 5) sampler.Record("_Z7unknownv", "unknown()", Grid(1), std::nullopt);
        ++launched;
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
  });
  v1::ListKernelsRequest req;
  req.set_sample_ms(400);
  absl::Time start = absl::Now();
  v1::ListKernelsResponse r = server_->ListKernels(req, RootCaller());
  done = true;
  app.join();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(400));
  const v1::AgentKernels* a = ByProcess(r, "sampled-app");
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->sampled()) << a->sample_error();
  EXPECT_EQ(a->sample_error(), "");
  EXPECT_GT(a->sample_seconds(), 0.3);
  ASSERT_EQ(a->kernels_size(), 4) << "3 census entries + the kernel no module lists";
  // The first entry of a name carries its counts, the second none.
  EXPECT_EQ(a->kernels(0).module(), "cuda-module-1");
  EXPECT_EQ(a->kernels(0).launches(), 30u);
  ASSERT_EQ(a->kernels(0).launch_configs_size(), 3);
  EXPECT_EQ(a->kernels(0).launch_configs(0).launches(), 10u);
  EXPECT_EQ(a->kernels(0).launch_configs(0).block(0), 128u);
  EXPECT_EQ(a->kernels(0).argument_shapes(), 2u);
  EXPECT_EQ(a->kernels(1).launches(), 0u);
  EXPECT_EQ(a->kernels(2).mangled_name(), "_Z4idlev");
  EXPECT_EQ(a->kernels(2).launches(), 0u);
  EXPECT_EQ(a->kernels(3).mangled_name(), "_Z7unknownv");
  EXPECT_EQ(a->kernels(3).module(), "");
  EXPECT_EQ(a->kernels(3).launches(), 5u);
  EXPECT_FALSE(sampler.active()) << "the daemon stopped the sample";
  const v1::AgentKernels* old = ByProcess(r, "census-only-app");
  ASSERT_NE(old, nullptr);
  EXPECT_FALSE(old->sampled());
  EXPECT_THAT(old->sample_error(), HasSubstr("does not offer launch sampling"));
  EXPECT_EQ(old->kernels_size(), 2) << "its census still comes";
}

// The sample's raw peer: answers SampleStop with `reply` (its id filled in).
struct RawSamplingAgent {
  RawAgent raw;
  static RawSamplingAgent Connect(const std::string& path) {
    return {RawAgent::Connect(path, {kFeatureLaunchSample, kFeatureLazyRing}, "raw-sampler", 4244)};
  }
  bool Answer(SampleReportMsg reply) {
    return raw.Answer<SampleStopMsg>(
        reply, [](const SampleStopMsg& stop, SampleReportMsg& r) { r.sample_id = stop.sample_id; });
  }
};

TEST_F(SampleTest, AReportPastTheProtocolsBoundsDropsTheAgentAndTheSampleSaysSo) {
  struct Case {
    const char* what;
    SampleReportMsg report;
  };
  std::vector<Case> cases;
  {
    SampleReportMsg r;
    SampledKernel k;
    k.mangled_name = "_Z1kv";
    k.configs.assign(kMaxSampledConfigsPerKernel + 1, SampledConfig{});
    r.kernels.push_back(k);
    cases.push_back({"too many configurations", r});
  }
  {
    SampleReportMsg r;
    SampledKernel k;
    k.mangled_name = "_Z1kv";
    k.argument_shapes = kMaxArgumentShapesCounted + 1;
    r.kernels.push_back(k);
    cases.push_back({"too many argument shapes", r});
  }
  {
    SampleReportMsg r;
    r.kernels.push_back(SampledKernel{});  // no name
    cases.push_back({"an unnamed kernel", r});
  }
  {
    SampleReportMsg r;
    r.seconds = 1e9;
    cases.push_back({"a sample longer than any", r});
  }
  StartServer();
  for (Case& c : cases) {
    SCOPED_TRACE(c.what);
    RawSamplingAgent raw = RawSamplingAgent::Connect(socket_);
    WaitAgents(1);
    std::thread agent([&] { raw.Answer(c.report); });
    v1::ListKernelsRequest req;
    req.set_sample_ms(50);
    v1::ListKernelsResponse r = server_->ListKernels(req, RootCaller());
    agent.join();
    ASSERT_EQ(r.agents_size(), 1);
    EXPECT_FALSE(r.agents(0).sampled());
    EXPECT_THAT(r.agents(0).sample_error(), HasSubstr("disconnected"));
    EXPECT_EQ(r.agents(0).kernels_size(), 0);
    for (int i = 0; i < 500 && !server_->ListAgents(RootCaller()).empty(); ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    EXPECT_TRUE(server_->ListAgents(RootCaller()).empty()) << "the agent broke the protocol: it is dropped";
  }
}

TEST_F(SampleTest, AnAgentThatDoesNotReportTimesOutAndALateReportIsDropped) {
  AgentLinkServerOptions o = Options();
  o.census_timeout = absl::Milliseconds(300);
  StartServer(o);
  RawSamplingAgent silent = RawSamplingAgent::Connect(socket_);  // never reports
  WaitAgents(1);
  v1::ListKernelsRequest req;
  req.set_sample_ms(50);
  absl::Time start = absl::Now();
  v1::ListKernelsResponse r = server_->ListKernels(req, RootCaller());
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  ASSERT_EQ(r.agents_size(), 1);
  EXPECT_FALSE(r.agents(0).sampled());
  EXPECT_THAT(r.agents(0).sample_error(), HasSubstr("did not report its launch sample within"));
  // The late report of the abandoned sample is dropped; the agent stays.
  SampleReportMsg late;
  late.sample_id = 1;
  EXPECT_TRUE(SendMessage(silent.raw.fd.get(), late).ok());
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(server_->ListAgents(RootCaller()).size(), 1u);
}

}  // namespace
}  // namespace kerncap::link::testing
