// The kernel census end to end on CPU: a real kerncapd, the real kerncapctl
// (kernels, arm's preview) and the synthetic agent standing in for an
// application that has loaded three kernels.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
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

// Rank-aware arming through the real binaries: two synthetic agents under
// Open MPI's environment as ranks 0 and 1; `arm --rank=1` takes only rank 1's
// dispatch and the capture records its rank.
TEST_F(KernelsE2eTest, RankArmTakesOnlyThatRanksProcessAndTheCaptureRecordsIt) {
  RunResult r = Ctl({"-q", "arm", "--kernel=rank_probe", "--rank=1", "--ttl=5m"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string arm_id(absl::StripAsciiWhitespace(r.out));
  auto run_rank = [&](const std::string& rank) {
    return RunProcess({BinaryPath("synthetic_agent"), "--socket=" + dir_ + "/agent.sock",
                       "--kernels=rank_probe", "--dispatches=2", "--region-mib=0.25",
                       "--wait-arm-ms=3000"},
                      std::chrono::seconds(60),
                      {{"OMPI_COMM_WORLD_RANK", rank}, {"OMPI_COMM_WORLD_LOCAL_RANK", rank},
                       {"OMPI_COMM_WORLD_SIZE", "2"}});
  };
  RunResult rank0 = run_rank("0");
  ASSERT_EQ(rank0.exit_code, 0) << rank0.out << rank0.err;
  EXPECT_FALSE(absl::StrContains(rank0.out, "capture_id")) << rank0.out;
  RunResult rank1 = run_rank("1");
  ASSERT_EQ(rank1.exit_code, 0) << rank1.out << rank1.err;
  ASSERT_TRUE(absl::StrContains(rank1.out, "capture_id")) << rank1.out;

  nlohmann::json arms = nlohmann::json::parse(Ctl({"-o", "json", "arms", "--all"}).out, nullptr,
                                              false);
  ASSERT_FALSE(arms.is_discarded());
  nlohmann::json arm;
  for (const nlohmann::json& a : arms["arms"]) {
    if (a["arm_id"] == arm_id) arm = a;
  }
  ASSERT_FALSE(arm.is_null()) << arms.dump();
  EXPECT_EQ(arm["captured"], 1) << arm.dump();
  EXPECT_EQ(arm["selector"]["rank"], 1) << arm.dump();
  ASSERT_EQ(arm["capture_ids"].size(), 1u) << arm.dump();
  r = Ctl({"-o", "json", "show", arm["capture_ids"][0].get<std::string>()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json shown = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(shown.is_discarded()) << r.out;
  const nlohmann::json& process = shown["manifest"]["process"];
  EXPECT_EQ(process["rank"], 1) << process.dump();
  EXPECT_EQ(process["has_rank"], true) << process.dump();
  Ctl({"disarm", arm_id});
}

// kernels --sample: the agents count their launches for the sample; a
// second synthetic agent launches 12 known dispatches only while it samples
// (dispatch i: kernels[i % 3], grid (i % 2) + 1, a scalar argument i % 3).
TEST_F(KernelsE2eTest, SampleCountsEachKernelsLaunchesConfigurationsAndArgumentShapes) {
  Background counted({BinaryPath("synthetic_agent"), "--socket=" + dir_ + "/agent.sock",
                      "--kernels=alpha,beta,gamma", "--dispatches=12", "--shapes=2",
                      "--scalar-shapes=3", "--wait-sample-ms=20000"});
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(Ctl({"--json", "agents"}).out,
                             absl::StrCat("\"pid\":", counted.pid()));
  })) << "the second agent did not connect";
  const std::string pid = absl::StrCat("--pid=", counted.pid());
  RunResult r = Ctl({"--json", "kernels", pid, "--sample=1500ms"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << r.out;
  ASSERT_EQ(doc["agents"].size(), 1u) << r.out;
  const nlohmann::json& a = doc["agents"][0];
  EXPECT_EQ(a["sampled"], true) << a.dump();
  EXPECT_GT(a["sample_seconds"].get<double>(), 1.0) << a.dump();
  ASSERT_EQ(a["kernels"].size(), 3u) << a.dump();
  for (const nlohmann::json& k : a["kernels"]) {
    SCOPED_TRACE(k.dump());
    EXPECT_EQ(k["launches"], 4);  // JSON policy: integers are numbers
    // alpha: dispatches 0, 3, 6, 9: grids 1, 2, 1, 2 and scalars 0, 0, 0, 0.
    ASSERT_EQ(k["launch_configs"].size(), 2u);
    EXPECT_EQ(k["launch_configs"][0]["launches"], 2);
    EXPECT_EQ(k["argument_shapes"], 2);
  }
  // The other agent was not asked (--pid), and the sample ended: the second
  // agent leaves once it did.
  EXPECT_TRUE(WaitFor([&] { return !counted.Running(); })) << counted.Stderr();

  // Human output: the sampled columns, the hottest first, and what was counted.
  r = Ctl({"kernels", "--sample=300ms", "-o", "wide"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "LAUNCHES")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "ARG SHAPES")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "MOST LAUNCHED CONFIG")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "launches in 0.3 s")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.err, "sampling launches for 300ms")) << r.err;

  // Bad durations name the problem.
  r = Ctl({"kernels", "--sample=2m"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "--sample")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "60s")) << r.err;
  r = Ctl({"kernels", "--sample=soon"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "bad duration")) << r.err;
}

}  // namespace
}  // namespace kerncap::testing
