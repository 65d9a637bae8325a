#include "agent/cuda/graph_model.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kerncap::agent::cuda {
namespace {

GraphNode Node(GraphNodeKind kind, std::vector<uint32_t> deps, uint64_t handle = 0) {
  GraphNode n;
  n.kind = kind;
  n.deps = std::move(deps);
  n.handle = handle;
  return n;
}

GraphNode Kernel(uint64_t function, std::vector<uint32_t> deps = {}) {
  GraphNode n = Node(GraphNodeKind::kKernel, std::move(deps));
  n.function = function;
  n.handle = 1000 + function;
  return n;
}

std::vector<std::string> Paths(const std::vector<FlatNode>& nodes) {
  std::vector<std::string> out;
  for (const FlatNode& n : nodes) out.push_back(PathString(n.path));
  return out;
}

TEST(GraphModelTest, FlattensInDependencyOrderWithLowestReadyIndexFirst) {
  // 0 depends on 2, 1 on nothing, 2 on 1, 3 on 0 and 1: the only valid order
  // with lowest-index tie-breaking is 1, 2, 0, 3.
  GraphLevel g;
  g.nodes = {Kernel(10, {2}), Kernel(11), Kernel(12, {1}), Kernel(13, {0, 1})};
  auto flat = FlattenGraph(g);
  ASSERT_TRUE(flat.ok()) << flat.error();
  EXPECT_EQ(Paths(*flat), (std::vector<std::string>{"1", "2", "0", "3"}));
  EXPECT_EQ((*flat)[2].function, 10u);
}

TEST(GraphModelTest, IndependentNodesKeepTheDriversOrder) {
  GraphLevel g;
  g.nodes = {Kernel(1), Kernel(2), Kernel(3)};
  auto flat = FlattenGraph(g);
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(Paths(*flat), (std::vector<std::string>{"0", "1", "2"}));
}

TEST(GraphModelTest, ChildGraphIsExpandedInPlaceAndItsPathsNestUnderIt) {
  auto body = std::make_shared<GraphLevel>();
  body->nodes = {Kernel(20), Kernel(21, {0})};
  auto inner = std::make_shared<GraphLevel>();
  inner->nodes = {Kernel(30)};
  body->nodes.push_back(Node(GraphNodeKind::kChildGraph, {1}));
  body->nodes.back().body = inner;
  GraphLevel g;
  g.nodes = {Kernel(10), Node(GraphNodeKind::kChildGraph, {0}), Kernel(12, {1}),
             Node(GraphNodeKind::kEmpty, {})};
  g.nodes[1].body = body;
  auto flat = FlattenGraph(g);
  ASSERT_TRUE(flat.ok()) << flat.error();
  // The empty node 3 is ready from the start but has a higher index than 0;
  // after 0, node 1 (the child) is ready and comes before 3.
  EXPECT_EQ(Paths(*flat), (std::vector<std::string>{"0", "1/0", "1/1", "1/2/0", "2", "3"}));
  EXPECT_EQ((*flat)[3].function, 30u);
  for (const FlatNode& n : *flat) EXPECT_NE(n.kind, GraphNodeKind::kChildGraph);
}

TEST(GraphModelTest, DependenciesAreHonouredWhateverTheirListOrder) {
  // A diamond with duplicated and unsorted dependency lists.
  GraphLevel g;
  g.nodes = {Kernel(0, {3, 1, 3}), Kernel(1, {2}), Kernel(2), Kernel(3, {2})};
  auto flat = FlattenGraph(g);
  ASSERT_TRUE(flat.ok());
  std::vector<int> pos(4);
  for (size_t i = 0; i < flat->size(); ++i) pos[(*flat)[i].path[0]] = static_cast<int>(i);
  for (uint32_t i = 0; i < g.nodes.size(); ++i) {
    for (uint32_t d : g.nodes[i].deps) EXPECT_LT(pos[d], pos[i]) << i << " before its dep " << d;
  }
}

TEST(GraphModelTest, CyclesAndBadIndicesAreErrorsNotOrders) {
  GraphLevel cycle;
  cycle.nodes = {Kernel(0, {1}), Kernel(1, {0}), Kernel(2)};
  auto f = FlattenGraph(cycle);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().find("cycle"), std::string::npos) << f.error();

  GraphLevel bad;
  bad.nodes = {Kernel(0, {5})};
  f = FlattenGraph(bad);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().find("node index 5"), std::string::npos) << f.error();

  GraphLevel self;
  self.nodes = {Kernel(0, {0})};
  EXPECT_FALSE(FlattenGraph(self).ok());

  GraphLevel no_body;
  no_body.nodes = {Node(GraphNodeKind::kChildGraph, {})};
  EXPECT_FALSE(FlattenGraph(no_body).ok());
}

TEST(GraphModelTest, NestingBeyondTheLimitIsRefused) {
  auto level = std::make_shared<GraphLevel>();
  level->nodes = {Kernel(1)};
  for (int d = 0; d < kMaxGraphDepth + 1; ++d) {
    auto up = std::make_shared<GraphLevel>();
    up->nodes = {Node(GraphNodeKind::kChildGraph, {})};
    up->nodes[0].body = level;
    level = up;
  }
  auto f = FlattenGraph(*level);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().find("nested deeper"), std::string::npos) << f.error();
}

TEST(GraphModelTest, DisabledNodesStayInTheOrderMarkedDisabled) {
  GraphLevel g;
  g.nodes = {Kernel(1), Kernel(2, {0})};
  g.nodes[0].enabled = false;
  auto f = FlattenGraph(g);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->size(), 2u);
  EXPECT_FALSE((*f)[0].enabled);
  EXPECT_TRUE((*f)[1].enabled);
}

TEST(GraphModelTest, SupportedKindsPassAndEachRefusedKindIsNamed) {
  std::vector<FlatNode> ok;
  for (GraphNodeKind k : {GraphNodeKind::kKernel, GraphNodeKind::kMemcpy, GraphNodeKind::kMemset,
                          GraphNodeKind::kHost, GraphNodeKind::kEmpty, GraphNodeKind::kEventWait,
                          GraphNodeKind::kEventRecord}) {
    FlatNode n;
    n.kind = k;
    n.path = {static_cast<uint32_t>(ok.size())};
    ok.push_back(n);
  }
  EXPECT_EQ(UnsupportedNodeReason(ok), "");

  struct Want {
    GraphNodeKind kind;
    const char* text;
  };
  for (const Want& w : {Want{GraphNodeKind::kMemAlloc, "memory allocation node"},
                        Want{GraphNodeKind::kMemFree, "memory free node"},
                        Want{GraphNodeKind::kConditional, "conditional node"},
                        Want{GraphNodeKind::kBatchMemOp, "batch memory operation"},
                        Want{GraphNodeKind::kExtSemaphoreWait, "external semaphore wait"},
                        Want{static_cast<GraphNodeKind>(99), "node type 99"}}) {
    std::vector<FlatNode> nodes = ok;
    FlatNode bad;
    bad.kind = w.kind;
    bad.path = {2, 5};
    nodes.insert(nodes.begin() + 3, bad);
    const std::string why = UnsupportedNodeReason(nodes);
    EXPECT_NE(why.find(w.text), std::string::npos) << why;
    EXPECT_NE(why.find("node 2/5"), std::string::npos) << why;
  }
  std::vector<FlatNode> dev = ok;
  dev[0].device_updatable = true;
  EXPECT_NE(UnsupportedNodeReason(dev).find("device-updatable"), std::string::npos);
}

TEST(GraphModelTest, PairingNeedsSameKindsAndDependenciesAtEveryLevel) {
  auto body = [] {
    auto b = std::make_shared<GraphLevel>();
    b->nodes = {Kernel(1), Node(GraphNodeKind::kMemset, {0})};
    return b;
  };
  auto make = [&] {
    GraphLevel g;
    g.nodes = {Kernel(5), Node(GraphNodeKind::kChildGraph, {0}), Kernel(6, {0, 1})};
    g.nodes[1].body = body();
    return g;
  };
  GraphLevel a = make();
  GraphLevel b = make();
  b.nodes[0].function = 77;  // parameters may differ
  b.nodes[2].deps = {1, 0};  // order of a dependency list does not matter
  std::string why;
  EXPECT_TRUE(SamePairing(a, b, &why)) << why;

  GraphLevel kind = make();
  kind.nodes[1].body->nodes[1].kind = GraphNodeKind::kMemcpy;
  EXPECT_FALSE(SamePairing(a, kind, &why));
  EXPECT_NE(why.find("node 1/1"), std::string::npos) << why;

  GraphLevel deps = make();
  deps.nodes[2].deps = {1};
  EXPECT_FALSE(SamePairing(a, deps, &why));
  EXPECT_NE(why.find("node 2"), std::string::npos) << why;

  GraphLevel count = make();
  count.nodes.push_back(Kernel(9));
  EXPECT_FALSE(SamePairing(a, count, &why));
  EXPECT_NE(why.find("3 nodes before and 4 after"), std::string::npos) << why;
}

TEST(GraphModelTest, NodeAtPathWalksIntoChildBodies) {
  GraphLevel g;
  g.nodes = {Kernel(1), Node(GraphNodeKind::kChildGraph, {0})};
  g.nodes[1].body = std::make_shared<GraphLevel>();
  g.nodes[1].body->nodes = {Kernel(7)};
  ASSERT_NE(NodeAtPath(g, {1, 0}), nullptr);
  EXPECT_EQ(NodeAtPath(g, {1, 0})->function, 7u);
  EXPECT_EQ(NodeAtPath(g, {1, 1}), nullptr);
  EXPECT_EQ(NodeAtPath(g, {0, 0}), nullptr);  // a kernel node has no body
  EXPECT_EQ(NodeAtPath(g, {2}), nullptr);
}

}  // namespace
}  // namespace kerncap::agent::cuda
