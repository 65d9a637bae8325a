// graph_driver.h: the CUDA driver side of graph support.
//
//   CudaGraphApi      GraphApi (graph_registry.h) over the driver's graph API.
//   GraphLaunchDecode what a cuGraphLaunch / tracking callback's parameter
//                     struct says (generated_cuda_meta.h), for the agent's hooks.
//
// Every call is checked; errors come back as "cuGraphClone: CUDA_ERROR_...".
// The caller runs these inside the agent's own scope (its driver calls are
// neither tracked nor gated).
#ifndef KERNCAP_AGENT_CUDA_GRAPH_DRIVER_H_
#define KERNCAP_AGENT_CUDA_GRAPH_DRIVER_H_

#include <cuda.h>
#include <cupti.h>

#include <cstdint>
#include <optional>

#include "agent/cuda/graph_registry.h"

namespace kerncap::agent::cuda {

class CudaGraphApi final : public GraphApi {
 public:
  Result<uint64_t> Clone(uint64_t graph) override;
  void Destroy(uint64_t graph) override;
  Result<std::vector<uint64_t>> Nodes(uint64_t graph) override;
  Result<std::vector<std::pair<uint64_t, uint64_t>>> Edges(uint64_t graph) override;
  Result<GraphNodeKind> Kind(uint64_t node) override;
  Result<uint64_t> ChildBody(uint64_t node) override;
  Result<uint64_t> FindInClone(uint64_t original_node, uint64_t clone_graph) override;
  Result<KernelFacts> Kernel(uint64_t node) override;
  Status ApplyNodeUpdate(uint64_t clone_node, uint32_t cbid, const void* params) override;
};

// Driver calls the registry tracks (always-on callbacks: none is on a launch
// path). True for the instantiate variants, the exec-level updates and
// cuGraphExecDestroy.
bool IsGraphTrackingCall(CUpti_CallbackId cbid);

// Replays a successful tracking call (its EXIT) on `registry`. Returns false
// when `cbid` is not one of them.
bool TrackGraphCall(CUpti_CallbackId cbid, const void* params, GraphRegistry* registry);

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_GRAPH_DRIVER_H_
