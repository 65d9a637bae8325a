// graph_model.h: the agent's picture of an instantiated CUDA graph, and the
// decisions taken on it without a GPU: the order in which an armed launch
// executes the graph node by node (the "eager" run of graph_executor.h), which
// graphs cannot be executed that way, and whether two graphs pair node for
// node (cuGraphExecUpdate).
//
// A graph is a tree of levels: the top level is the agent's private clone of
// the graph the exec was instantiated from (cuGraphClone), a child-graph node
// holds its embedded graph as a nested level. Handles are the driver's
// (CUgraph / CUgraphNode / CUfunction values) as integers, so this file needs
// no CUDA header and is tested on CPU-only machines.
//
// Flattened order (FlattenGraph): per level, Kahn's topological sort that
// always takes the ready node with the lowest index (the driver's node order,
// cuGraphGetNodes); a child-graph node is replaced, in place, by the
// flattened order of its body. Running the nodes one after another in this
// order on one stream honours every dependency of the graph (serialising
// branches the driver might have run concurrently, which a correct graph
// cannot depend on). Edge data (programmatic / launch-order ports) only
// relaxes a dependency, so treating every edge as a full dependency is safe.
// A node's position in this order (node_index) and its path (index per level,
// top first, "4/1") identify it in a capture.
#ifndef KERNCAP_AGENT_CUDA_GRAPH_MODEL_H_
#define KERNCAP_AGENT_CUDA_GRAPH_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/core/status.h"

namespace kerncap::agent::cuda {

// == CUgraphNodeType (cuda.h), checked by static_assert where the driver is used.
enum class GraphNodeKind : int {
  kKernel = 0,
  kMemcpy = 1,
  kMemset = 2,
  kHost = 3,
  kChildGraph = 4,
  kEmpty = 5,
  kEventWait = 6,
  kEventRecord = 7,
  kExtSemaphoreSignal = 8,
  kExtSemaphoreWait = 9,
  kMemAlloc = 10,
  kMemFree = 11,
  kBatchMemOp = 12,
  kConditional = 13,
};
// "kernel", "memcpy", ..., or "node type <n>" for a value this agent does not know.
std::string GraphNodeKindName(GraphNodeKind kind);

// Bounds on what the agent models (a graph beyond them is refused, never
// half-modelled): nesting of child graphs and nodes after flattening.
inline constexpr int kMaxGraphDepth = 16;
inline constexpr size_t kMaxGraphNodes = 1u << 20;

struct GraphLevel;

struct GraphNode {
  uint64_t handle = 0;  // CUgraphNode of the agent's clone
  GraphNodeKind kind = GraphNodeKind::kEmpty;
  std::vector<uint32_t> deps;  // indices, in this level, of the nodes it depends on
  std::shared_ptr<GraphLevel> body;  // kChildGraph: the embedded graph
  uint64_t function = 0;             // kKernel: the CUfunction (or CUkernel) it launches
  bool device_updatable = false;     // kKernel: CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE
  bool enabled = true;               // cleared by cuGraphNodeSetEnabled(exec, node, 0)
};

struct GraphLevel {
  uint64_t graph = 0;  // CUgraph of this level (the clone, or a child's embedded graph)
  std::vector<GraphNode> nodes;
};

// One node of the flattened order (values copied: a flattened order stays
// valid while the model changes).
struct FlatNode {
  std::vector<uint32_t> path;  // index per level, top first
  uint64_t handle = 0;
  GraphNodeKind kind = GraphNodeKind::kEmpty;
  uint64_t function = 0;
  bool device_updatable = false;
  bool enabled = true;
};

// The flattened order (see the header comment). Fails on a dependency that
// names no node of its level, a cycle, nesting deeper than kMaxGraphDepth or
// more than kMaxGraphNodes nodes.
Result<std::vector<FlatNode>> FlattenGraph(const GraphLevel& top);

// "4/1".
std::string PathString(const std::vector<uint32_t>& path);

// Why the agent cannot execute these nodes one by one with the same effect as
// the graph, naming the first such node; empty when it can. Refused: memory
// allocation / free nodes (graph-owned memory the agent cannot allocate or
// restore the same way), conditional nodes (the body that runs is decided on
// the GPU), external-semaphore and batch memory-operation nodes, device-
// updatable kernel nodes (kernels may rewrite the node's parameters from the
// GPU, so the agent's copy would be stale) and node types it does not know.
std::string UnsupportedNodeReason(const std::vector<FlatNode>& nodes);

// True when `a` and `b` pair node for node by index at every level: the same
// number of nodes, kinds and dependency sets, child bodies recursively.
// Otherwise false with `why` naming the first difference.
bool SamePairing(const GraphLevel& a, const GraphLevel& b, std::string* why);

// The node at `path`, or null when the path leaves the tree.
GraphNode* NodeAtPath(GraphLevel& top, const std::vector<uint32_t>& path);

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_GRAPH_MODEL_H_
