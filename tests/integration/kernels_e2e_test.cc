// The kernel census end to end on CPU: a real kerncapd, the real kerncapctl
// (kernels, arm's preview) and the synthetic agent standing in for an
// application that has loaded three kernels.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/local_daemon.h"
#include "tests/integration/subprocess.h"

namespace kerncap::testing {
namespace {

class KernelsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("kc_kernels");
    daemon_ = std::make_unique<LocalDaemon>(dir_);
    ASSERT_TRUE(daemon_->up()) << "kerncapd did not come up:\n" << daemon_->Stderr();
    // The agent keeps dispatching (each kernel in turn) until stopped.
    agent_ = std::make_unique<Background>(std::vector<std::string>{
        BinaryPath("synthetic_agent"), "--socket=" + dir_ + "/agent.sock",
        "--kernels=matmul,matmul_bias,softmax", "--dispatches=1000000",
        "--dispatch-interval-ms=5"});
    ASSERT_TRUE(WaitFor([&] {
      return absl::StrContains(Ctl({"--json", "agents"}).out, "synthetic_agent");
    })) << "the synthetic agent did not connect";
  }
  void TearDown() override {
    if (agent_) agent_->Stop(15, std::chrono::seconds(10));
    if (daemon_) daemon_->Stop(15);
    RemoveTree(dir_);
  }
  RunResult Ctl(std::vector<std::string> args) const { return daemon_->Ctl(std::move(args)); }

  std::string dir_;
  std::unique_ptr<LocalDaemon> daemon_;
  std::unique_ptr<Background> agent_;
};

TEST_F(KernelsE2eTest, ListsTheLoadedKernelsFiltersThemAndArmPreviewsWhatItWouldTake) {
  RunResult r = Ctl({"--json", "kernels"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << r.out;
  ASSERT_EQ(doc["agents"].size(), 1u) << r.out;
  const nlohmann::json& agent = doc["agents"][0];
  EXPECT_EQ(agent["agent"]["process"]["process_name"], "synthetic_agent") << agent.dump();
  ASSERT_EQ(agent["kernels"].size(), 3u) << agent.dump();
  EXPECT_EQ(agent["kernels"][0]["demangled_name"], "matmul");
  EXPECT_EQ(agent["kernels"][0]["mangled_name"], "_Z6matmulv");
  EXPECT_EQ(agent["kernels"][2]["demangled_name"], "softmax");
  EXPECT_EQ(agent["kernels"][0]["module"], "synthetic-module-0");

  // The filter matches as an arm would: substring by default, regex on request.
  r = Ctl({"kernels", "--kernel=matmul"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "matmul_bias")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "softmax")) << r.out;
  r = Ctl({"kernels", "--kernel=^matmul$", "--match=regex", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "_Z6matmulv\n");
  r = Ctl({"kernels", "--kernel=(unclosed", "--match=regex"});
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_TRUE(absl::StrContains(r.err, "--kernel")) << r.err;
  r = Ctl({"kernels", "--pid=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "no agents connected that match")) << r.out;

  // The arm preview: a pattern that takes two distinct kernels is warned
  // about; one that takes one is not.
  r = Ctl({"arm", "--kernel=matmul", "--ttl=1m"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "matches 2 distinct loaded kernels")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "warning: the pattern matches 2 distinct kernels")) << r.out;
  ASSERT_EQ(Ctl({"disarm", "--all"}).exit_code, 0);
  r = Ctl({"arm", "--kernel=softmax", "--ttl=1m"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "matches 1 distinct loaded kernel:")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "warning")) << r.out;
  r = Ctl({"arm", "--kernel=nothing_like_it", "--ttl=1m"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "no kernel loaded by the 1 agent(s) it applies to matches yet"))
      << r.out;
  r = Ctl({"arm", "--kernel=matmul", "--pid=1", "--ttl=1m"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "no live agent it applies to yet")) << r.out;
  // The synthetic agent has no launcher rank: a rank arm applies to no agent,
  // so its preview must not count the agent's kernels.
  r = Ctl({"arm", "--kernel=matmul", "--rank=0", "--ttl=1m"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "rank=0")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "no live agent it applies to yet")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "distinct")) << r.out;
}

}  // namespace
}  // namespace kerncap::testing
