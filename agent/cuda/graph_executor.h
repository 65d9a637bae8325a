// graph_executor.h: runs one launch of an instantiated CUDA graph node by
// node on the launch stream, in the flattened order of graph_model.h (the
// "eager run" of an armed cuGraphLaunch whose nodes an arm selected); the
// real launch is then swapped for an executable empty graph (EmptyExecs), so
// the driver enqueues nothing but stream order is kept.
//
// How each node runs (its parameters read from the agent's clone):
//   kernel        cuLaunchKernelEx with the node's grid, block, dynamic shared
//                 memory and arguments, and its launch attributes: cluster
//                 dimension (unless compiled in), cluster scheduling policy,
//                 preferred cluster dimension, cooperative, memory sync domain
//                 and map, access policy window, and the priority when the
//                 exec was instantiated with USE_NODE_PRIORITY (otherwise the
//                 stream's priority applies, as for the graph)
//   memcpy        cuMemcpy3DAsync with the node's CUDA_MEMCPY3D
//   memset        cuMemsetD{8,16,32}Async (one row) / cuMemsetD2D{8,16,32}Async
//   host          cuLaunchHostFunc with the node's function and data
//   event record  cuEventRecord;  event wait  cuStreamWaitEvent
//   empty, disabled nodes: nothing (a disabled node is an empty node)
// Everything a run needs is read before it starts (PrepareEagerRun): a
// failure there leaves the application's launch untouched.
#ifndef KERNCAP_AGENT_CUDA_GRAPH_EXECUTOR_H_
#define KERNCAP_AGENT_CUDA_GRAPH_EXECUTOR_H_

#include <cuda.h>

#include <map>
#include <mutex>
#include <vector>

#include "agent/core/capture_types.h"
#include "agent/core/status.h"
#include "agent/cuda/graph_registry.h"

namespace kerncap::agent::cuda {

// One node of the run, ready to enqueue.
struct EagerOp {
  GraphNodeKind kind = GraphNodeKind::kEmpty;
  bool run = false;  // false: nothing to enqueue (empty or disabled node)
  // kKernel
  CUfunction function = nullptr;  // a CUfunction, or a CUkernel cast to one
  LaunchDesc desc;                // what the capture records as its launch configuration
  std::vector<CUlaunchAttribute> attrs;
  void** kernel_params = nullptr;  // owned by the clone's node
  void** extra = nullptr;
  // kMemcpy
  CUDA_MEMCPY3D copy{};
  // kMemset
  CUDA_MEMSET_NODE_PARAMS memset{};
  // kHost
  CUDA_HOST_NODE_PARAMS host{};
  // kEventRecord, kEventWait
  CUevent event = nullptr;
};

// The ops of `plan`, one per flattened node. Fails (naming the node) when a
// node's parameters cannot be read or name something the run cannot do on
// `launch_context` (a kernel of another context, a memset element size other
// than 1, 2 or 4).
Result<std::vector<EagerOp>> PrepareEagerRun(const GraphLaunchPlan& plan, CUcontext launch_context);
// The op of one node of `plan` (what PrepareEagerRun does for each); e.g. a
// kernel node's launch configuration and arguments for its shape key.
Status PrepareEagerOp(const FlatNode& node, const GraphLaunchPlan& plan, CUcontext launch_context,
                      EagerOp* op);

// Enqueues `op` on `stream`.
Status EnqueueEagerOp(const EagerOp& op, CUstream stream);

// One executable empty graph per context, made on first use and kept (the
// agent's own: never tracked, never destroyed while the process runs).
class EmptyExecs {
 public:
  Result<CUgraphExec> For(CUcontext context);
  void ResetAfterFork();

 private:
  std::mutex mu_;
  std::map<CUcontext, CUgraphExec> execs_;
};

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_GRAPH_EXECUTOR_H_
