// fake_graph_api.h: an in-memory GraphApi for tests of the graph registry
// and of graph dispatch selection. Graphs and nodes are integers; Clone()
// deep-copies (child bodies too) with fresh handles and remembers which clone
// node stands for which original, per cloned graph level, as the driver's
// cuGraphNodeFindInClone does. Destroyed graphs answer no query, so a test
// sees a use after destroy as an error.
//
// Like the driver, graphs with memory allocation / free or conditional nodes
// are not cloned. Kernel parameter updates (ApplyNodeUpdate) take `params` as a pointer to
// the new function handle (uint64_t); a test can make them fail.
#ifndef KERNCAP_AGENT_CUDA_FAKE_GRAPH_API_H_
#define KERNCAP_AGENT_CUDA_FAKE_GRAPH_API_H_

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "agent/cuda/graph_registry.h"

namespace kerncap::agent::cuda {

class FakeGraphApi : public GraphApi {
 public:
  struct FakeNode {
    GraphNodeKind kind = GraphNodeKind::kEmpty;
    uint64_t body = 0;  // kChildGraph
    uint64_t function = 0;
    bool device_updatable = false;
  };
  struct FakeGraph {
    std::vector<uint64_t> nodes;
    std::vector<std::pair<uint64_t, uint64_t>> edges;  // (from, to)
    bool destroyed = false;
    bool is_clone = false;
  };

  // Building graphs (the "application" side).
  uint64_t NewGraph() {
    const uint64_t g = next_++;
    graphs_[g] = FakeGraph{};
    return g;
  }
  uint64_t AddNode(uint64_t graph, GraphNodeKind kind, std::vector<uint64_t> deps = {},
                   uint64_t function = 0) {
    const uint64_t n = next_++;
    nodes_[n] = FakeNode{kind, 0, function, false};
    graphs_[graph].nodes.push_back(n);
    for (uint64_t d : deps) graphs_[graph].edges.emplace_back(d, n);
    return n;
  }
  uint64_t AddChild(uint64_t graph, uint64_t body, std::vector<uint64_t> deps = {}) {
    // Like cuGraphAddChildGraphNode: the node embeds a copy of `body`.
    auto copy = Clone(body);
    const uint64_t n = AddNode(graph, GraphNodeKind::kChildGraph, std::move(deps));
    nodes_[n].body = copy.value();
    graphs_[copy.value()].is_clone = false;
    return n;
  }
  // The embedded copy's node that stands for `original` (to name nested nodes).
  uint64_t EmbeddedNode(uint64_t child_node, uint64_t original) {
    return clone_map_[{nodes_[child_node].body, original}];
  }
  void AppDestroy(uint64_t graph) { graphs_[graph].destroyed = true; }
  FakeNode& node(uint64_t n) { return nodes_[n]; }

  // Knobs and observations.
  void FailClone(bool fail) { fail_clone_ = fail; }
  void FailUpdates(bool fail) { fail_updates_ = fail; }
  void FailFindInClone(bool fail) { fail_find_ = fail; }
  int live_clones() const {
    int n = 0;
    for (const auto& [h, g] : graphs_) n += g.is_clone && !g.destroyed ? 1 : 0;
    return n;
  }
  int destroy_errors() const { return destroy_errors_; }
  int updates_applied() const { return updates_; }

  // GraphApi
  Result<uint64_t> Clone(uint64_t graph) override {
    if (fail_clone_) return Error("injected clone failure");
    auto it = graphs_.find(graph);
    if (it == graphs_.end() || it->second.destroyed) return Error("clone of a dead graph");
    // Like the driver: no clones of graphs with memory or conditional nodes.
    for (uint64_t n : it->second.nodes) {
      const GraphNodeKind k = nodes_[n].kind;
      if (k == GraphNodeKind::kMemAlloc || k == GraphNodeKind::kMemFree ||
          k == GraphNodeKind::kConditional) {
        return Error("CUDA_ERROR_NOT_SUPPORTED (cloning a graph with memory or conditional nodes)");
      }
    }
    const uint64_t c = next_++;
    FakeGraph copy;
    copy.is_clone = true;
    std::map<uint64_t, uint64_t> remap;
    for (uint64_t n : it->second.nodes) {
      const uint64_t m = next_++;
      FakeNode fn = nodes_[n];
      if (fn.kind == GraphNodeKind::kChildGraph) {
        fn.body = Clone(fn.body).value();
        graphs_[fn.body].is_clone = false;  // owned by its node, not destroyed separately
      }
      nodes_[m] = fn;
      remap[n] = m;
      copy.nodes.push_back(m);
      clone_map_[{c, n}] = m;
    }
    for (const auto& [from, to] : it->second.edges) copy.edges.emplace_back(remap[from], remap[to]);
    graphs_[c] = std::move(copy);
    // Nested originals are found in the nested copies (MapNodes walks down).
    for (uint64_t n : it->second.nodes) {
      if (nodes_[n].kind != GraphNodeKind::kChildGraph) continue;
      const uint64_t copy_body = nodes_[remap[n]].body;
      const uint64_t orig_body = nodes_[n].body;
      for (size_t i = 0; i < graphs_[orig_body].nodes.size(); ++i) {
        clone_map_[{copy_body, graphs_[orig_body].nodes[i]}] = graphs_[copy_body].nodes[i];
      }
    }
    return c;
  }
  void Destroy(uint64_t graph) override {
    auto it = graphs_.find(graph);
    if (it == graphs_.end() || it->second.destroyed || !it->second.is_clone) {
      ++destroy_errors_;
      return;
    }
    it->second.destroyed = true;
  }
  Result<std::vector<uint64_t>> Nodes(uint64_t graph) override {
    auto it = graphs_.find(graph);
    if (it == graphs_.end() || it->second.destroyed) return Error("nodes of a dead graph");
    return it->second.nodes;
  }
  Result<std::vector<std::pair<uint64_t, uint64_t>>> Edges(uint64_t graph) override {
    auto it = graphs_.find(graph);
    if (it == graphs_.end() || it->second.destroyed) return Error("edges of a dead graph");
    return it->second.edges;
  }
  Result<GraphNodeKind> Kind(uint64_t node) override {
    auto it = nodes_.find(node);
    if (it == nodes_.end()) return Error("no such node");
    return it->second.kind;
  }
  Result<uint64_t> ChildBody(uint64_t node) override {
    auto it = nodes_.find(node);
    if (it == nodes_.end() || it->second.kind != GraphNodeKind::kChildGraph) {
      return Error("not a child-graph node");
    }
    return it->second.body;
  }
  Result<uint64_t> FindInClone(uint64_t original, uint64_t clone) override {
    if (fail_find_) return Error("injected FindInClone failure");
    auto it = clone_map_.find({clone, original});
    if (it == clone_map_.end()) return Error("not in that clone");
    return it->second;
  }
  Result<KernelFacts> Kernel(uint64_t node) override {
    auto it = nodes_.find(node);
    if (it == nodes_.end() || it->second.kind != GraphNodeKind::kKernel) return Error("not a kernel");
    return KernelFacts{it->second.function, it->second.device_updatable};
  }
  Status ApplyNodeUpdate(uint64_t clone_node, uint32_t /*cbid*/, const void* params) override {
    if (fail_updates_) return Error("injected update failure");
    auto it = nodes_.find(clone_node);
    if (it == nodes_.end()) return Error("no such node");
    if (it->second.kind == GraphNodeKind::kKernel && params != nullptr) {
      it->second.function = *static_cast<const uint64_t*>(params);
    }
    ++updates_;
    return OkStatus();
  }

 private:
  uint64_t next_ = 0x100;
  std::map<uint64_t, FakeGraph> graphs_;
  std::map<uint64_t, FakeNode> nodes_;
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> clone_map_;  // (clone graph, original) -> node
  bool fail_clone_ = false;
  bool fail_updates_ = false;
  bool fail_find_ = false;
  int destroy_errors_ = 0;
  int updates_ = 0;
};

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_FAKE_GRAPH_API_H_
