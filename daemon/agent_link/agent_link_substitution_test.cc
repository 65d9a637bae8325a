// Live substitution over the agent link: AgentLinkServer (the daemon's
// registry and pushes) with real AgentLinkClients whose substitution hooks
// drive the agent's SubstitutionTable, as the CUDA agent's do.
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

#include "agent/link/agent_link_client.h"
#include "agent/link/substitution_table.h"
#include "daemon/agent_link/agent_link_server.h"
#include "daemon/agent_link/agent_link_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kerncap::link::testing {
namespace {

using ::testing::HasSubstr;

// An agent process in miniature: the link client plus the table, the code
// object it was sent, and a "launch" entry point.
struct SubstitutingAgent {
  std::unique_ptr<agent::AgentLinkClient> client;
  agent::SubstitutionTable table{static_cast<uint32_t>(::getpid()), "sub-app"};
  std::mutex mu;
  std::string code;  // the last code object received
  int unsubstitutes = 0;
  int link_lost = 0;

  // One dispatch of `kernel`; the variant "loads" when its code is "GOOD".
  std::optional<agent::SubstitutionTable::Decision> Launch(const std::string& kernel) {
    auto prepare = [](const SubstituteMsg&, const std::string& image, std::string_view)
        -> LinkResult<agent::SubstitutionTable::Prepared> {
      if (image != "GOOD") return LinkStatus::Error("the variant does not load");
      agent::SubstitutionTable::Prepared p;
      p.variant = std::make_shared<agent::SubstitutionVariant>();
      p.checks = {"layout matches"};
      return p;
    };
    return table.Decide(kernel, kernel, 0, agent::SubstitutionTable::Clock::now(), prepare, {});
  }
  void Flush() {
    for (const auto& r : table.TakeReports(agent::SubstitutionTable::Clock::now(), true)) {
      client->SendSubstitutionReport(r);
    }
  }
};

class SubstitutionLinkTest : public AgentLinkTest {
 protected:
  SubstitutingAgent& NewAgent(bool offers_substitution = true) {
    agents_.push_back(std::make_unique<SubstitutingAgent>());
    SubstitutingAgent* a = agents_.back().get();
    agent::AgentLinkClientOptions o;
    o.socket_path = socket_;
    o.identity.process_name = "sub-app";
    o.identity.platform = Platform::kSynthetic;
    o.initial_wait_ms = 2000;
    o.retry_initial_ms = 10;
    o.retry_max_ms = 50;
    if (offers_substitution) {
      o.on_substitute = [a](const SubstituteMsg& m, std::string code) {
        {
          std::lock_guard lock(a->mu);
          a->code = code;
        }
        // What a backend refuses at receipt (an unsupported format, say).
        if (code == "NOPE") return LinkStatus::Error("this agent cannot load that");
        return a->table.Add(m, std::move(code), agent::SubstitutionTable::Clock::now());
      };
      o.on_unsubstitute = [a](const UnsubstituteMsg& m) {
        std::lock_guard lock(a->mu);
        ++a->unsubstitutes;
        a->table.Remove(m.sub_id, m.reason);
      };
      o.on_link_lost = [a] {
        std::lock_guard lock(a->mu);
        ++a->link_lost;
        a->table.DropAll();
      };
    }
    a->client = std::make_unique<agent::AgentLinkClient>(o);
    a->client->Start();
    EXPECT_TRUE(a->client->WaitConnected(0, 5000));
    return *a;
  }

  v1::SubstituteRequest Request(const std::string& code, bool ab = false) {
    v1::SubstituteRequest req;
    req.mutable_selector()->set_kernel("saxpy");
    req.set_code_object(code);
    req.set_format("cubin");
    req.set_name("saxpy_variant.cubin");
    req.set_ab(ab);
    req.set_preflight("kerncap-replay validate cap-1: PASS");
    return req;
  }

  // Polls the daemon's record until `pred` holds.
  v1::SubstitutionInfo WaitInfo(const std::string& id,
                                const std::function<bool(const v1::SubstitutionInfo&)>& pred) {
    v1::SubstitutionInfo last;
    for (int i = 0; i < 500; ++i) {
      for (const auto& s : server_->ListSubstitutions(true, RootCaller())) {
        if (s.substitution_id() == id) last = s;
      }
      if (pred(last)) return last;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "timed out; last: " << last.ShortDebugString();
    return last;
  }

  void TearDown() override {
    for (auto& a : agents_) a->client->Stop();
    AgentLinkTest::TearDown();
    agents_.clear();
  }

  std::vector<std::unique_ptr<SubstitutingAgent>> agents_;
};

TEST_F(SubstitutionLinkTest, CodeObjectReachesAgentAndResultsComeBack) {
  StartServer();
  SubstitutingAgent& a = NewAgent();
  auto info = server_->Substitute(Request("GOOD", /*ab=*/true), RootCaller(),
                                  "kerncap-replay validate cap-1: PASS");
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->agents_size(), 1);
  EXPECT_EQ(info->agents(0).state(), WireName(SubstitutionState::kPending));
  EXPECT_EQ(info->state(), v1::SUBSTITUTION_ACTIVE);
  EXPECT_EQ(info->preflight(), "kerncap-replay validate cap-1: PASS");
  // The agent has it once the push is read.
  for (int i = 0; i < 500 && !a.table.live(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(a.table.live()) << a.client->last_error() << " "
                              << server_->ListSubstitutions(true, RootCaller())[0].ShortDebugString();
  {
    std::lock_guard lock(a.mu);
    EXPECT_EQ(a.code, "GOOD");
  }
  for (int i = 0; i < 6; ++i) {
    auto d = a.Launch("saxpy");
    ASSERT_TRUE(d);
    a.table.AddTiming(d->sub_id, d->use_variant, d->use_variant ? 5.0 : 9.0);
  }
  EXPECT_FALSE(a.Launch("other"));
  a.Flush();
  v1::SubstitutionInfo got = WaitInfo(info->substitution_id(), [](const auto& s) {
    return s.agents_size() == 1 && s.agents(0).variant_launches() == 3;
  });
  const auto& r = got.agents(0);
  EXPECT_EQ(r.state(), WireName(SubstitutionState::kActive));
  EXPECT_EQ(r.original_launches(), 3u);
  EXPECT_EQ(r.variant().samples(), 3u);
  EXPECT_DOUBLE_EQ(r.variant().mean_us(), 5.0);
  EXPECT_DOUBLE_EQ(r.original().mean_us(), 9.0);
  EXPECT_EQ(r.kernel(), "saxpy");
  EXPECT_THAT(r.checks(), ::testing::ElementsAre("layout matches"));

  // Unsubstitute reaches the agent; the record ends at once.
  auto ended = server_->Unsubstitute(info->substitution_id(), RootCaller());
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->state(), v1::SUBSTITUTION_ENDED);
  for (int i = 0; i < 500 && a.table.live(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(a.table.live());
  EXPECT_FALSE(a.Launch("saxpy"));
  EXPECT_TRUE(server_->ListSubstitutions(false, RootCaller()).empty());
  EXPECT_EQ(server_->ListSubstitutions(true, RootCaller()).size(), 1u);
  EXPECT_EQ(server_->Unsubstitute("sub-nope", RootCaller()).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SubstitutionLinkTest, RefusedVariantIsReportedAndNothingSubstituted) {
  StartServer();
  SubstitutingAgent& a = NewAgent();
  auto info = server_->Substitute(Request("BROKEN"), RootCaller(), "test: no preflight");
  ASSERT_TRUE(info.ok()) << info.status();
  for (int i = 0; i < 500 && !a.table.live(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(a.Launch("saxpy"));  // the load fails at the first matching dispatch
  a.Flush();
  v1::SubstitutionInfo got = WaitInfo(info->substitution_id(), [](const auto& s) {
    return s.state() == v1::SUBSTITUTION_ENDED;
  });
  EXPECT_EQ(got.agents(0).state(), WireName(SubstitutionState::kRefused));
  EXPECT_THAT(got.agents(0).reason(), HasSubstr("does not load"));
  EXPECT_EQ(got.agents(0).variant_launches(), 0u);
}

TEST_F(SubstitutionLinkTest, AgentRefusalAtReceiptIsReported) {
  StartServer();
  NewAgent();
  auto req = Request("GOOD");
  req.mutable_selector()->set_kernel("(");
  req.mutable_selector()->set_match(v1::NAME_REGEX);
  // The daemon validates the selector itself.
  EXPECT_EQ(server_->Substitute(req, RootCaller(), "test: no preflight").status().code(), absl::StatusCode::kInvalidArgument);
  // The agent's hook refuses: the client reports it as "refused".
  auto info = server_->Substitute(Request("NOPE"), RootCaller(), "test: no preflight");
  ASSERT_TRUE(info.ok());
  v1::SubstitutionInfo got = WaitInfo(info->substitution_id(), [](const auto& s) {
    return s.state() == v1::SUBSTITUTION_ENDED;
  });
  EXPECT_EQ(got.agents(0).state(), WireName(SubstitutionState::kRefused)) << agents_[0]->client->last_error();
  EXPECT_THAT(got.agents(0).reason(), HasSubstr("cannot load that"));
}

TEST_F(SubstitutionLinkTest, ValidationAndTargets) {
  StartServer();
  // No agent at all.
  EXPECT_EQ(server_->Substitute(Request("GOOD"), RootCaller(), "test: no preflight").status().code(),
            absl::StatusCode::kFailedPrecondition);
  // An agent that does not offer substitution is not a target.
  NewAgent(/*offers_substitution=*/false);
  EXPECT_EQ(server_->Substitute(Request("GOOD"), RootCaller(), "test: no preflight").status().code(),
            absl::StatusCode::kFailedPrecondition);
  NewAgent();
  auto bad_format = Request("GOOD");
  bad_format.set_format("hsaco");
  EXPECT_EQ(server_->Substitute(bad_format, RootCaller(), "test: no preflight").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(server_->Substitute(Request(""), RootCaller(), "test: no preflight").status().code(), absl::StatusCode::kInvalidArgument);
  auto nth = Request("GOOD");
  nth.mutable_selector()->set_nth(2);
  EXPECT_EQ(server_->Substitute(nth, RootCaller(), "test: no preflight").status().code(), absl::StatusCode::kInvalidArgument);
  auto other_pid = Request("GOOD");
  other_pid.mutable_selector()->set_pid(1);
  EXPECT_EQ(server_->Substitute(other_pid, RootCaller(), "test: no preflight").status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto ok = server_->Substitute(Request("GOOD"), RootCaller(), "test: no preflight");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->agents_size(), 1);  // only the agent that offers it
}

TEST_F(SubstitutionLinkTest, DaemonGoingAwayEndsItOnTheAgent) {
  StartServer();
  SubstitutingAgent& a = NewAgent();
  auto info = server_->Substitute(Request("GOOD"), RootCaller(), "test: no preflight");
  ASSERT_TRUE(info.ok());
  for (int i = 0; i < 500 && !a.table.live(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(a.Launch("saxpy"));
  server_->Shutdown(true);
  for (int i = 0; i < 500 && a.table.live(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(a.table.live());
  EXPECT_FALSE(a.Launch("saxpy"));
  std::lock_guard lock(a.mu);
  EXPECT_GE(a.link_lost, 1);
}

TEST_F(SubstitutionLinkTest, AgentDisconnectEndsItOnTheDaemon) {
  StartServer();
  SubstitutingAgent& a = NewAgent();
  auto info = server_->Substitute(Request("GOOD"), RootCaller(), "test: no preflight");
  ASSERT_TRUE(info.ok());
  a.client->Stop();
  v1::SubstitutionInfo got = WaitInfo(info->substitution_id(), [](const auto& s) {
    return s.state() == v1::SUBSTITUTION_ENDED;
  });
  EXPECT_EQ(got.agents(0).state(), WireName(SubstitutionState::kEnded));
  EXPECT_THAT(got.agents(0).reason(), HasSubstr("disconnected"));
}

}  // namespace
}  // namespace kerncap::link::testing
