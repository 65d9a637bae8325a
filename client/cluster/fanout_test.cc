#include "client/cluster/fanout.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace kerncap::cluster {
namespace {

NodeCommand Sh(const std::string& node, const std::string& script) {
  return {node, {"/bin/sh", "-c", script}};
}

TEST(FanoutTest, KeepsEveryNodesOutputAndExitCodeInInputOrder) {
  std::vector<NodeCommand> cmds;
  for (int i = 0; i < 6; ++i) {
    cmds.push_back(Sh(absl::StrCat("n", i), absl::StrCat("echo out", i, "; echo err", i,
                                                         " >&2; exit ", i % 3)));
  }
  FanoutOptions o;
  o.concurrency = 2;
  std::vector<NodeOutcome> r = RunFanout(cmds, o);
  ASSERT_EQ(r.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(r[i].node, absl::StrCat("n", i));
    EXPECT_EQ(r[i].out, absl::StrCat("out", i, "\n"));
    EXPECT_EQ(r[i].err, absl::StrCat("err", i, "\n"));
    EXPECT_EQ(r[i].exit_code, i % 3);
    EXPECT_EQ(r[i].ok(), i % 3 == 0);
    EXPECT_FALSE(r[i].timed_out);
  }
}

TEST(FanoutTest, AHungNodeIsKilledAtItsDeadlineAndTheOthersStillAnswer) {
  FanoutOptions o;
  o.concurrency = 4;
  o.timeout_s = 0.5;
  o.kill_grace_s = 0.5;
  auto start = std::chrono::steady_clock::now();
  // The hung node ignores SIGTERM: the grace period's SIGKILL ends it.
  std::vector<NodeOutcome> r =
      RunFanout({Sh("good", "echo fine"), Sh("hung", "trap '' TERM; sleep 30"),
                 Sh("slowchild", "sleep 30 & wait")},
                o);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(s, 5.0);
  EXPECT_TRUE(r[0].ok());
  EXPECT_EQ(r[0].out, "fine\n");
  EXPECT_TRUE(r[1].timed_out);
  EXPECT_FALSE(r[1].ok());
  EXPECT_TRUE(r[2].timed_out);
}

TEST(FanoutTest, ConcurrencyIsBounded) {
  // 8 nodes of 0.3 s, 2 at a time: at least 4 rounds.
  std::vector<NodeCommand> cmds;
  for (int i = 0; i < 8; ++i) cmds.push_back(Sh(absl::StrCat("n", i), "sleep 0.3"));
  FanoutOptions o;
  o.concurrency = 2;
  auto start = std::chrono::steady_clock::now();
  std::vector<NodeOutcome> r = RunFanout(cmds, o);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(s, 1.15);
  for (const NodeOutcome& n : r) EXPECT_TRUE(n.ok()) << n.node;
  o.concurrency = 8;
  start = std::chrono::steady_clock::now();
  RunFanout(cmds, o);
  s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(s, 1.1);
}

TEST(FanoutTest, ACommandThatCannotStartIsAnOutcomeNotAnAbort) {
  std::vector<NodeOutcome> r = RunFanout(
      {{"missing", {"/nonexistent/kerncapctl"}}, Sh("fine", "true")}, FanoutOptions());
  EXPECT_FALSE(r[0].ok());
  EXPECT_FALSE(r[0].spawn_error.empty());
  EXPECT_TRUE(r[1].ok());
}

TEST(FanoutTest, OutputIsBoundedPerNode) {
  FanoutOptions o;
  o.max_output = 1000;
  std::vector<NodeOutcome> r = RunFanout({Sh("big", "head -c 100000 /dev/zero")}, o);
  EXPECT_TRUE(r[0].ok());
  EXPECT_EQ(r[0].out.size(), 1000u);
  EXPECT_TRUE(r[0].truncated);
}

}  // namespace
}  // namespace kerncap::cluster
