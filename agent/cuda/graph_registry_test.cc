#include "agent/cuda/graph_registry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "agent/cuda/fake_graph_api.h"

namespace kerncap::agent::cuda {
namespace {

using K = GraphNodeKind;

constexpr uint64_t kExec = 0xE0;
constexpr uint32_t kAnyCbid = 1;

std::vector<uint64_t> Functions(const GraphLaunchPlan& p) {
  std::vector<uint64_t> out;
  for (const FlatNode& n : p.nodes()) {
    if (n.kind == K::kKernel) out.push_back(n.function);
  }
  return out;
}

class GraphRegistryTest : public ::testing::Test {
 protected:
  // memset -> kernel 1 -> kernel 2 -> memcpy
  void BuildChain() {
    g_ = api_.NewGraph();
    memset_ = api_.AddNode(g_, K::kMemset);
    k1_ = api_.AddNode(g_, K::kKernel, {memset_}, 1);
    k2_ = api_.AddNode(g_, K::kKernel, {k1_}, 2);
    memcpy_ = api_.AddNode(g_, K::kMemcpy, {k2_});
  }

  FakeGraphApi api_;
  GraphRegistry reg_{&api_};
  uint64_t g_ = 0, memset_ = 0, k1_ = 0, k2_ = 0, memcpy_ = 0;
};

TEST_F(GraphRegistryTest, InstantiatedGraphIsModelledFromAClone) {
  BuildChain();
  reg_.OnInstantiate(kExec, g_, 0);
  api_.AppDestroy(g_);  // applications usually do this right away
  auto plan = reg_.BeginLaunch(kExec);
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(plan->unsupported, "");
  ASSERT_EQ(plan->nodes().size(), 4u);
  EXPECT_EQ(plan->nodes()[0].kind, K::kMemset);
  EXPECT_EQ(plan->nodes()[3].kind, K::kMemcpy);
  EXPECT_EQ(Functions(*plan), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(plan->graph, g_);
  EXPECT_EQ(plan->launch_index, 1u);
  EXPECT_EQ(reg_.BeginLaunch(kExec)->launch_index, 2u);
  // The nodes are the clone's, not the (destroyed) source graph's.
  for (const FlatNode& n : plan->nodes()) {
    EXPECT_NE(n.handle, memset_);
    EXPECT_NE(n.handle, k1_);
  }
  EXPECT_EQ(api_.live_clones(), 1);
  EXPECT_EQ(reg_.BeginLaunch(0xBAD), nullptr);
}

TEST_F(GraphRegistryTest, ExecLevelKernelUpdateIsReplayedOnTheCloneByTheSourceNode) {
  BuildChain();
  reg_.OnInstantiate(kExec, g_, 0);
  api_.AppDestroy(g_);
  const uint64_t f = 42;
  reg_.OnNodeUpdate(kExec, k2_, kAnyCbid, &f);
  auto plan = reg_.BeginLaunch(kExec);
  EXPECT_EQ(plan->unsupported, "");
  EXPECT_EQ(Functions(*plan), (std::vector<uint64_t>{1, 42}));
  EXPECT_EQ(api_.updates_applied(), 1);
}

TEST_F(GraphRegistryTest, UpdateOfANodeTheAgentCannotPlaceRefusesTheExec) {
  BuildChain();
  reg_.OnInstantiate(kExec, g_, 0);
  const uint64_t f = 42;
  reg_.OnNodeUpdate(kExec, 0x999999, kAnyCbid, &f);
  auto plan = reg_.BeginLaunch(kExec);
  EXPECT_NE(plan->unsupported.find("could not place"), std::string::npos) << plan->unsupported;
}

TEST_F(GraphRegistryTest, FailedReplayOfAnUpdateRefusesTheExec) {
  BuildChain();
  reg_.OnInstantiate(kExec, g_, 0);
  api_.FailUpdates(true);
  const uint64_t f = 42;
  reg_.OnNodeUpdate(kExec, k1_, kAnyCbid, &f);
  EXPECT_NE(reg_.BeginLaunch(kExec)->unsupported.find("injected update failure"),
            std::string::npos);
}

TEST_F(GraphRegistryTest, NodesOfSourceGraphsThatCouldNotBeMappedRefuseOnlyWhenNamed) {
  BuildChain();
  api_.FailFindInClone(true);
  reg_.OnInstantiate(kExec, g_, 0);
  EXPECT_EQ(reg_.BeginLaunch(kExec)->unsupported, "");  // runs as instantiated
  reg_.OnSetEnabled(kExec, k1_, false);
  EXPECT_NE(reg_.BeginLaunch(kExec)->unsupported, "");
}

TEST_F(GraphRegistryTest, DisabledNodeIsMarkedAndReenabled) {
  BuildChain();
  reg_.OnInstantiate(kExec, g_, 0);
  reg_.OnSetEnabled(kExec, k1_, false);
  auto plan = reg_.BeginLaunch(kExec);
  ASSERT_EQ(plan->nodes().size(), 4u);
  EXPECT_FALSE(plan->nodes()[1].enabled);
  EXPECT_TRUE(plan->nodes()[2].enabled);
  reg_.OnSetEnabled(kExec, k1_, true);
  EXPECT_TRUE(reg_.BeginLaunch(kExec)->nodes()[1].enabled);
  // The earlier plan is a snapshot: it still says what that launch ran.
  EXPECT_FALSE(plan->nodes()[1].enabled);
}

TEST_F(GraphRegistryTest, ChildGraphBodyReplacedByExecChildGraphUpdate) {
  const uint64_t body = api_.NewGraph();
  const uint64_t b0 = api_.AddNode(body, K::kKernel, {}, 10);
  api_.AddNode(body, K::kKernel, {b0}, 11);
  g_ = api_.NewGraph();
  const uint64_t host = api_.AddNode(g_, K::kHost);
  const uint64_t child = api_.AddChild(g_, body, {host});
  api_.AddNode(g_, K::kEventRecord, {child});
  reg_.OnInstantiate(kExec, g_, 0);
  auto plan = reg_.BeginLaunch(kExec);
  ASSERT_EQ(plan->unsupported, "");
  EXPECT_EQ(Functions(*plan), (std::vector<uint64_t>{10, 11}));
  EXPECT_EQ(PathString(plan->nodes()[1].path), "1/0");

  // A nested node named through the child's embedded graph is mapped.
  const uint64_t nested = api_.EmbeddedNode(child, b0);
  const uint64_t f = 12;
  reg_.OnNodeUpdate(kExec, nested, kAnyCbid, &f);
  EXPECT_EQ(Functions(*reg_.BeginLaunch(kExec)), (std::vector<uint64_t>{12, 11}));

  // Same topology, new parameters: nested nodes keep their mapping.
  const uint64_t body2 = api_.NewGraph();
  const uint64_t c0 = api_.AddNode(body2, K::kKernel, {}, 20);
  api_.AddNode(body2, K::kKernel, {c0}, 21);
  reg_.OnChildGraphUpdate(kExec, child, body2);
  api_.AppDestroy(body2);
  plan = reg_.BeginLaunch(kExec);
  EXPECT_EQ(plan->unsupported, "");
  EXPECT_EQ(Functions(*plan), (std::vector<uint64_t>{20, 21}));
  const uint64_t f2 = 30;
  reg_.OnNodeUpdate(kExec, nested, kAnyCbid, &f2);
  EXPECT_EQ(Functions(*reg_.BeginLaunch(kExec)), (std::vector<uint64_t>{30, 21}));
  EXPECT_EQ(api_.live_clones(), 2);  // the exec's clone and the replacement body
  plan.reset();
  reg_.OnDestroy(kExec);
  EXPECT_EQ(api_.live_clones(), 0);
  EXPECT_EQ(api_.destroy_errors(), 0);
}

TEST_F(GraphRegistryTest, ChildUpdateWithOtherShapeDropsNestedMappingSoLaterNestedUpdatesRefuse) {
  const uint64_t body = api_.NewGraph();
  const uint64_t b0 = api_.AddNode(body, K::kKernel, {}, 10);
  g_ = api_.NewGraph();
  const uint64_t child = api_.AddChild(g_, body);
  reg_.OnInstantiate(kExec, g_, 0);
  const uint64_t nested = api_.EmbeddedNode(child, b0);
  const uint64_t body2 = api_.NewGraph();
  api_.AddNode(body2, K::kMemset);  // another kind at index 0
  reg_.OnChildGraphUpdate(kExec, child, body2);
  EXPECT_EQ(reg_.BeginLaunch(kExec)->unsupported, "");
  const uint64_t f = 5;
  reg_.OnNodeUpdate(kExec, nested, kAnyCbid, &f);
  EXPECT_NE(reg_.BeginLaunch(kExec)->unsupported, "");
}

TEST_F(GraphRegistryTest, ExecUpdateWithSameTopologyReplacesTheCloneAndPairsByIndex) {
  BuildChain();
  reg_.OnInstantiate(kExec, g_, 0);
  auto held = reg_.BeginLaunch(kExec);  // a launch in flight keeps the old clone
  api_.AppDestroy(g_);
  const uint64_t g2 = api_.NewGraph();
  const uint64_t m = api_.AddNode(g2, K::kMemset);
  const uint64_t n1 = api_.AddNode(g2, K::kKernel, {m}, 7);
  const uint64_t n2 = api_.AddNode(g2, K::kKernel, {n1}, 8);
  api_.AddNode(g2, K::kMemcpy, {n2});
  reg_.OnExecUpdate(kExec, g2);
  auto plan = reg_.BeginLaunch(kExec);
  EXPECT_EQ(plan->unsupported, "");
  EXPECT_EQ(Functions(*plan), (std::vector<uint64_t>{7, 8}));
  EXPECT_EQ(plan->graph, g2);
  EXPECT_EQ(api_.live_clones(), 2);
  held.reset();
  EXPECT_EQ(api_.live_clones(), 1);  // the old clone went with the last plan using it
  // The instantiation graph's node and the new graph's node both name node 1.
  const uint64_t a = 100, b = 200;
  reg_.OnNodeUpdate(kExec, k1_, kAnyCbid, &a);
  EXPECT_EQ(Functions(*reg_.BeginLaunch(kExec)), (std::vector<uint64_t>{100, 8}));
  reg_.OnNodeUpdate(kExec, n1, kAnyCbid, &b);
  EXPECT_EQ(Functions(*reg_.BeginLaunch(kExec)), (std::vector<uint64_t>{200, 8}));
  EXPECT_EQ(reg_.BeginLaunch(kExec)->unsupported, "");
}

TEST_F(GraphRegistryTest, ExecUpdateThatCannotBePairedRunsTheNewGraphButForgetsOldNodes) {
  // Two independent nodes, added in the other order in the new graph: the
  // driver pairs them its way; index pairing does not verify.
  g_ = api_.NewGraph();
  const uint64_t m = api_.AddNode(g_, K::kMemset);
  k1_ = api_.AddNode(g_, K::kKernel, {}, 1);
  reg_.OnInstantiate(kExec, g_, 0);
  const uint64_t g2 = api_.NewGraph();
  const uint64_t n1 = api_.AddNode(g2, K::kKernel, {}, 7);
  api_.AddNode(g2, K::kMemset);
  reg_.OnExecUpdate(kExec, g2);
  auto plan = reg_.BeginLaunch(kExec);
  EXPECT_EQ(plan->unsupported, "");
  EXPECT_EQ(Functions(*plan), (std::vector<uint64_t>{7}));
  const uint64_t f = 8;
  reg_.OnNodeUpdate(kExec, n1, kAnyCbid, &f);  // a node of the new graph: exact
  EXPECT_EQ(Functions(*reg_.BeginLaunch(kExec)), (std::vector<uint64_t>{8}));
  reg_.OnNodeUpdate(kExec, k1_, kAnyCbid, &f);  // an old node: no longer placed
  EXPECT_NE(reg_.BeginLaunch(kExec)->unsupported.find("could not place"), std::string::npos);
  (void)m;
}

TEST_F(GraphRegistryTest, ExecUpdateAfterDisablingANodeRefuses) {
  BuildChain();
  reg_.OnInstantiate(kExec, g_, 0);
  reg_.OnSetEnabled(kExec, k2_, false);
  reg_.OnExecUpdate(kExec, g_);
  EXPECT_NE(reg_.BeginLaunch(kExec)->unsupported.find("disabled"), std::string::npos);
}

TEST_F(GraphRegistryTest, DestroyDropsTheExecAndAReusedHandleStartsAfresh) {
  BuildChain();
  reg_.OnInstantiate(kExec, g_, 0);
  const uint64_t first_serial = reg_.BeginLaunch(kExec)->serial;
  reg_.OnDestroy(kExec);
  EXPECT_EQ(reg_.BeginLaunch(kExec), nullptr);
  EXPECT_EQ(reg_.size(), 0u);
  EXPECT_EQ(api_.live_clones(), 0);
  reg_.OnInstantiate(kExec, g_, 0);  // the driver reused the handle
  auto plan = reg_.BeginLaunch(kExec);
  EXPECT_NE(plan->serial, first_serial);
  EXPECT_EQ(plan->launch_index, 1u);
}

TEST_F(GraphRegistryTest, DeviceLaunchInstantiationRefusesItAndEveryOtherExecWhileItLives) {
  BuildChain();
  reg_.OnInstantiate(kExec, g_, 0);
  reg_.OnInstantiate(kExec + 1, g_, kInstantiateFlagDeviceLaunch);
  EXPECT_NE(reg_.BeginLaunch(kExec + 1)->unsupported.find("device launch"), std::string::npos);
  EXPECT_NE(reg_.BeginLaunch(kExec)->unsupported.find("device launch"), std::string::npos);
  reg_.OnDestroy(kExec + 1);
  EXPECT_EQ(reg_.BeginLaunch(kExec)->unsupported, "");
}

TEST_F(GraphRegistryTest, CloneFailureRefusesWithTheReason) {
  BuildChain();
  api_.FailClone(true);
  reg_.OnInstantiate(kExec, g_, 0);
  auto plan = reg_.BeginLaunch(kExec);
  ASSERT_NE(plan, nullptr);
  EXPECT_NE(plan->unsupported.find("injected clone failure"), std::string::npos);
  // The source graph's kernels are still known, to name the refusal.
  EXPECT_EQ(Functions(*plan), (std::vector<uint64_t>{1, 2}));
}

TEST_F(GraphRegistryTest, UnsupportedNodeKindsRefuseTheLaunch) {
  g_ = api_.NewGraph();
  const uint64_t alloc = api_.AddNode(g_, K::kMemAlloc);
  api_.AddNode(g_, K::kKernel, {alloc}, 1);
  reg_.OnInstantiate(kExec, g_, 0);
  auto plan = reg_.BeginLaunch(kExec);
  // The driver does not clone such graphs: the reason comes from the source.
  EXPECT_NE(plan->unsupported.find("memory allocation"), std::string::npos) << plan->unsupported;
  EXPECT_EQ(plan->nodes().size(), 2u);  // the kernels are still known (for the report)
  EXPECT_EQ(api_.live_clones(), 0);
  const uint64_t f = 9;
  reg_.OnNodeUpdate(kExec, alloc, kAnyCbid, &f);  // a refused exec is not changed
  EXPECT_EQ(api_.updates_applied(), 0);

  const uint64_t g2 = api_.NewGraph();
  const uint64_t k = api_.AddNode(g2, K::kKernel, {}, 3);
  api_.node(k).device_updatable = true;
  reg_.OnInstantiate(kExec + 1, g2, 0);
  EXPECT_NE(reg_.BeginLaunch(kExec + 1)->unsupported.find("device-updatable"), std::string::npos);
}

TEST_F(GraphRegistryTest, RefusalsAreReportedOncePerExecAndKey) {
  EXPECT_TRUE(reg_.FirstReport(1, "arm-a"));
  EXPECT_FALSE(reg_.FirstReport(1, "arm-a"));
  EXPECT_TRUE(reg_.FirstReport(1, "arm-b"));
  EXPECT_TRUE(reg_.FirstReport(2, "arm-a"));
}

TEST_F(GraphRegistryTest, ForkChildForgetsWithoutDestroyingTheParentsClones) {
  BuildChain();
  reg_.OnInstantiate(kExec, g_, 0);
  reg_.ResetAfterFork();
  EXPECT_EQ(reg_.size(), 0u);
  EXPECT_EQ(api_.live_clones(), 1);  // left alone
  EXPECT_EQ(api_.destroy_errors(), 0);
}

}  // namespace
}  // namespace kerncap::agent::cuda
