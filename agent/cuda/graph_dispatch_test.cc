#include "agent/cuda/graph_dispatch.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "agent/testing/fake_transport.h"
#include "agent/cuda/fake_graph_api.h"

namespace kerncap::agent::cuda {
namespace {

using K = GraphNodeKind;

// Functions 1..4 are "step", 9 is "norm".
KernelMatchInfo Describe(const FlatNode& n) {
  KernelMatchInfo info;
  info.demangled_name = n.function == 9 ? "norm(float*)" : "step(float*, int)";
  info.mangled_name = n.function == 9 ? "_Z4normPf" : "_Z4stepPfi";
  return info;
}

class GraphDispatchTest : public ::testing::Test {
 protected:
  // step, step, norm, child{step, step}: four `step` nodes per launch.
  uint64_t BuildDecodeStep() {
    const uint64_t body = api_.NewGraph();
    const uint64_t b0 = api_.AddNode(body, K::kKernel, {}, 3);
    api_.AddNode(body, K::kKernel, {b0}, 4);
    const uint64_t g = api_.NewGraph();
    const uint64_t s1 = api_.AddNode(g, K::kKernel, {}, 1);
    const uint64_t s2 = api_.AddNode(g, K::kKernel, {s1}, 2);
    const uint64_t n = api_.AddNode(g, K::kKernel, {s2}, 9);
    api_.AddChild(g, body, {n});
    return g;
  }

  FakeGraphApi api_;
  GraphRegistry reg_{&api_};
  FakeTransport t_;
};

TEST_F(GraphDispatchTest, NthCountsNodeExecutionsAcrossLaunches) {
  reg_.OnInstantiate(1, BuildDecodeStep(), 0);
  t_.ArmSelector("step", /*skip=*/0, /*nth=*/19, /*count=*/0);  // 5th launch, 3rd step
  for (int launch = 1; launch <= 6; ++launch) {
    auto plan = reg_.BeginLaunch(1);
    ASSERT_EQ(plan->unsupported, "");
    auto sel = SelectGraphNodes(plan->nodes(), Describe, &t_);
    if (launch != 5) {
      EXPECT_TRUE(sel.empty()) << "launch " << launch;
      continue;
    }
    ASSERT_EQ(sel.size(), 1u);
    EXPECT_EQ(sel[0].ticket.dispatch_index, 19u);
    const FlatNode& n = plan->nodes()[sel[0].index];
    EXPECT_EQ(n.function, 3u);  // the first `step` of the child graph
    EXPECT_EQ(PathString(n.path), "3/0");
    EXPECT_EQ(sel[0].info.demangled_name, "step(float*, int)");
  }
}

TEST_F(GraphDispatchTest, DirectLaunchesAndGraphNodesShareTheCount) {
  reg_.OnInstantiate(1, BuildDecodeStep(), 0);
  t_.ArmSelector("step", /*skip=*/2, /*nth=*/4, /*count=*/0);
  KernelMatchInfo direct;
  direct.demangled_name = "step(float*, int)";
  EXPECT_FALSE(t_.ShouldCapture(direct));  // matching dispatch 1 (skipped)
  EXPECT_FALSE(t_.ShouldCapture(direct));  // 2 (skipped)
  auto sel = SelectGraphNodes(reg_.BeginLaunch(1)->nodes(), Describe, &t_);  // 3..6
  ASSERT_EQ(sel.size(), 1u);
  EXPECT_EQ(sel[0].ticket.dispatch_index, 6u);
  EXPECT_EQ(sel[0].index, 4u);  // order: step, step, norm, 3/0, 3/1
}

TEST_F(GraphDispatchTest, DisabledKernelNodesAreNoDispatch) {
  const uint64_t g = api_.NewGraph();
  const uint64_t s1 = api_.AddNode(g, K::kKernel, {}, 1);
  api_.AddNode(g, K::kKernel, {s1}, 2);
  reg_.OnInstantiate(1, g, 0);
  reg_.OnSetEnabled(1, s1, false);
  t_.ArmSelector("step", 0, /*nth=*/1, 0);
  auto sel = SelectGraphNodes(reg_.BeginLaunch(1)->nodes(), Describe, &t_);
  ASSERT_EQ(sel.size(), 1u);
  EXPECT_EQ(sel[0].index, 1u);  // the enabled one
}

TEST_F(GraphDispatchTest, CountTakesSeveralNodesOfOneLaunch) {
  reg_.OnInstantiate(1, BuildDecodeStep(), 0);
  t_.ArmSelector("step", 0, 0, /*count=*/3);
  auto sel = SelectGraphNodes(reg_.BeginLaunch(1)->nodes(), Describe, &t_);
  ASSERT_EQ(sel.size(), 3u);
  EXPECT_EQ(sel[0].index, 0u);
  EXPECT_EQ(sel[1].index, 1u);
  EXPECT_EQ(sel[2].index, 3u);  // norm (2) does not match
  EXPECT_TRUE(SelectGraphNodes(reg_.BeginLaunch(1)->nodes(), Describe, &t_).empty());
}

TEST_F(GraphDispatchTest, RefusalIsReportedOncePerExecOnTheMatchingArmWithoutCounting) {
  const uint64_t g = api_.NewGraph();
  const uint64_t alloc = api_.AddNode(g, K::kMemAlloc);
  const uint64_t s = api_.AddNode(g, K::kKernel, {alloc}, 1);
  api_.AddNode(g, K::kKernel, {s}, 9);
  reg_.OnInstantiate(7, g, 0);
  t_.ArmSelector("norm", 0, /*nth=*/1, 0);
  for (int launch = 0; launch < 3; ++launch) {
    auto plan = reg_.BeginLaunch(7);
    ASSERT_NE(plan->unsupported, "");
    EXPECT_EQ(ReportGraphRefusal(*plan, Describe, &t_, &reg_), launch == 0 ? 1 : 0);
  }
  ASSERT_EQ(t_.skipped().size(), 1u);
  const auto& s0 = t_.skipped()[0];
  EXPECT_EQ(s0.ticket.arm_id, "arm-fake");
  EXPECT_EQ(s0.ticket.dispatch_index, 0u);
  EXPECT_FALSE(s0.give_back);
  EXPECT_EQ(s0.info.demangled_name, "norm(float*)");
  EXPECT_NE(s0.reason.find("memory allocation"), std::string::npos) << s0.reason;
  EXPECT_NE(s0.reason.find("CUDA graph exec 0x7"), std::string::npos) << s0.reason;
  // Not counted: the arm still takes the first capturable `norm`.
  KernelMatchInfo direct;
  direct.demangled_name = "norm(float*)";
  auto ticket = t_.ShouldCapture(direct);
  ASSERT_TRUE(ticket.has_value());
  EXPECT_EQ(ticket->dispatch_index, 1u);
  // Another exec of the same graph is reported on its own.
  reg_.OnInstantiate(8, g, 0);
  t_.ArmSelector("norm", 0, 1, 0);
  EXPECT_EQ(ReportGraphRefusal(*reg_.BeginLaunch(8), Describe, &t_, &reg_), 1);
}

TEST_F(GraphDispatchTest, RefusalWithoutMatchingArmReportsNothing) {
  const uint64_t g = api_.NewGraph();
  api_.AddNode(g, K::kConditional);
  api_.AddNode(g, K::kKernel, {}, 1);
  reg_.OnInstantiate(7, g, 0);
  t_.ArmSelector("norm", 0, 1, 0);
  EXPECT_EQ(ReportGraphRefusal(*reg_.BeginLaunch(7), Describe, &t_, &reg_), 0);
  EXPECT_TRUE(t_.skipped().empty());
}

}  // namespace
}  // namespace kerncap::agent::cuda
