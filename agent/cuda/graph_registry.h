// graph_registry.h: always-on tracking of the application's instantiated CUDA
// graphs (execs), so an armed cuGraphLaunch knows what the exec runs.
//
// Why a private clone: an exec cannot be inspected (the driver has no getters
// for exec nodes), and applications usually destroy the source graph right
// after instantiating it. So at instantiate time the registry takes a clone
// of the source graph (cuGraphClone; the clone has the parameters the exec
// was instantiated with) and maps every node of the source graph to the
// clone's node (cuGraphNodeFindInClone, while the source is alive). Every
// later exec-level change is replayed on the clone:
//   cuGraphExec{Kernel,Memcpy,Memset,Host}NodeSetParams, cuGraphExecEvent
//   {Record,Wait}NodeSetEvent, cuGraphExecNodeSetParams -> the same
//       parameters set on the clone's node (GraphApi::ApplyNodeUpdate);
//   cuGraphExecChildGraphNodeSetParams (and cuGraphExecNodeSetParams of a
//       child-graph node) -> the child's body is replaced by a clone of the
//       given graph;
//   cuGraphNodeSetEnabled -> the node is skipped (a disabled node is an
//       empty node, CUDA docs);
//   cuGraphExecUpdate(exec, g) -> the exec now runs g's parameters (the
//       driver accepts only a topologically identical g): the clone is
//       replaced by a clone of g. Pairing rule for the nodes the application
//       names afterwards: g's own nodes map exactly (found in the new clone);
//       the nodes of the graphs before pair by index at every level (the
//       driver's node order, the order nodes were added), kept only when
//       kinds and dependency sets match index for index (SamePairing), else
//       forgotten (a later update naming one refuses the exec: no guessed
//       node is ever changed). An update while a node is disabled refuses the
//       exec (whether it stays disabled across an update is not documented);
//   cuGraphExecDestroy -> dropped (its clones are destroyed once no launch
//       in flight uses them).
// Any failure while tracking marks the exec unsupported with the reason; the
// application's own calls are never changed. The registry never calls the
// driver by itself: GraphApi does (graph_driver.h; a fake in the tests).
//
// Instantiation for device launch (CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)
// marks that exec unsupported and, while such an exec exists, every exec: a
// kernel of any graph may launch it from the GPU, which works only from a
// kernel that runs inside a real graph launch.
//
// Thread-safe. All GraphApi calls happen inside the registry's calls (and in
// the destructor of the last plan holding a clone), on the caller's thread.
#ifndef KERNCAP_AGENT_CUDA_GRAPH_REGISTRY_H_
#define KERNCAP_AGENT_CUDA_GRAPH_REGISTRY_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agent/core/status.h"
#include "agent/cuda/graph_model.h"

namespace kerncap::agent::cuda {

// The driver calls the registry needs (handles as integers).
class GraphApi {
 public:
  virtual ~GraphApi() = default;
  virtual Result<uint64_t> Clone(uint64_t graph) = 0;
  virtual void Destroy(uint64_t graph) = 0;
  virtual Result<std::vector<uint64_t>> Nodes(uint64_t graph) = 0;
  // (from, to): `to` depends on `from`.
  virtual Result<std::vector<std::pair<uint64_t, uint64_t>>> Edges(uint64_t graph) = 0;
  virtual Result<GraphNodeKind> Kind(uint64_t node) = 0;
  // The embedded graph of a child-graph node (owned by the node).
  virtual Result<uint64_t> ChildBody(uint64_t node) = 0;
  virtual Result<uint64_t> FindInClone(uint64_t original_node, uint64_t clone_graph) = 0;
  struct KernelFacts {
    uint64_t function = 0;
    bool device_updatable = false;
  };
  virtual Result<KernelFacts> Kernel(uint64_t node) = 0;
  // Applies an exec-level parameter change to `clone_node`: `cbid` is the
  // CUPTI callback id of the application's call, `params` its parameter
  // struct (generated_cuda_meta.h).
  virtual Status ApplyNodeUpdate(uint64_t clone_node, uint32_t cbid, const void* params) = 0;
};

// Instantiate flags the registry interprets (== CUgraphInstantiate_flags).
inline constexpr uint64_t kInstantiateFlagDeviceLaunch = 4;
inline constexpr uint64_t kInstantiateFlagUseNodePriority = 8;

// What one launch of an exec runs. Immutable; keeps the clones it refers to
// alive until released.
struct GraphLaunchPlan {
  uint64_t exec = 0;
  uint64_t graph = 0;   // the source graph (of the instantiation or the last cuGraphExecUpdate)
  uint64_t serial = 0;  // agent-assigned, 1-based, unique per process: tells reused handles apart
  uint64_t flags = 0;   // instantiate flags
  uint64_t launch_index = 0;  // launches of this exec the agent saw while armed, this one included
  // The flattened order (graph_model.h); shared between the launches of one
  // version of the exec. Empty when the graph could not be modelled.
  std::shared_ptr<const std::vector<FlatNode>> flat;
  const std::vector<FlatNode>& nodes() const {
    static const std::vector<FlatNode> kNone;
    return flat != nullptr ? *flat : kNone;
  }
  std::string unsupported;      // non-empty: the launch cannot be executed node by node; why
  std::shared_ptr<const void> keepalive;  // the clones
};

class GraphRegistry {
 public:
  explicit GraphRegistry(GraphApi* api);
  ~GraphRegistry();
  GraphRegistry(const GraphRegistry&) = delete;
  GraphRegistry& operator=(const GraphRegistry&) = delete;

  // After a successful instantiation of `exec` from `graph` (alive now).
  void OnInstantiate(uint64_t exec, uint64_t graph, uint64_t flags);
  // After a successful exec-level parameter change of `node` (a node of a
  // graph the exec was instantiated or updated from).
  void OnNodeUpdate(uint64_t exec, uint64_t node, uint32_t cbid, const void* params);
  void OnChildGraphUpdate(uint64_t exec, uint64_t node, uint64_t child_graph);
  void OnSetEnabled(uint64_t exec, uint64_t node, bool enabled);
  void OnExecUpdate(uint64_t exec, uint64_t graph);
  // Before cuGraphExecDestroy (the handle may be reused right after).
  void OnDestroy(uint64_t exec);

  // One launch of `exec`: counts it (count = false: does not; the launch
  // sampler looks before the armed path counts) and returns what it runs;
  // null when the exec is not known (instantiated before the agent was loaded).
  std::shared_ptr<const GraphLaunchPlan> BeginLaunch(uint64_t exec, bool count = true);
  // True the first time for (exec serial, key): refusals are reported once
  // per exec and arm, not once per launch.
  bool FirstReport(uint64_t serial, const std::string& key);

  size_t size() const;
  // Fork child: forget everything (the parent's clones are not the child's
  // and must not be destroyed from it).
  void ResetAfterFork();

 private:
  struct Exec;
  // Marks `e` unsupported (the first reason is kept).
  static void Refuse(Exec& e, std::string why);
  Result<std::shared_ptr<GraphLevel>> BuildLevel(uint64_t graph, int depth);
  // Adds original-node -> path entries for `original` matched in `tree`.
  void MapNodes(uint64_t original, const GraphLevel& clone_level, const GraphLevel& tree,
                std::vector<uint32_t>* prefix, int depth,
                std::unordered_map<uint64_t, std::vector<uint32_t>>* out);
  // Entry for `node` of `e`, or null (and `e` refused) when unmapped.
  GraphNode* Resolve(Exec& e, uint64_t node, const char* what);

  GraphApi* api_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::unique_ptr<Exec>> execs_;
  uint64_t next_serial_ = 1;
  int device_launch_execs_ = 0;
  std::set<std::pair<uint64_t, std::string>> reported_;
};

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_GRAPH_REGISTRY_H_
