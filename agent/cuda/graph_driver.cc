#include "agent/cuda/graph_driver.h"

#include <cupti.h>  // includes generated_cuda_meta.h (which has no include guard)

#include <string>
#include <vector>

#include "agent/cuda/driver_api.h"

namespace kerncap::agent::cuda {
namespace {

static_assert(static_cast<int>(GraphNodeKind::kKernel) == CU_GRAPH_NODE_TYPE_KERNEL);
static_assert(static_cast<int>(GraphNodeKind::kMemcpy) == CU_GRAPH_NODE_TYPE_MEMCPY);
static_assert(static_cast<int>(GraphNodeKind::kMemset) == CU_GRAPH_NODE_TYPE_MEMSET);
static_assert(static_cast<int>(GraphNodeKind::kHost) == CU_GRAPH_NODE_TYPE_HOST);
static_assert(static_cast<int>(GraphNodeKind::kChildGraph) == CU_GRAPH_NODE_TYPE_GRAPH);
static_assert(static_cast<int>(GraphNodeKind::kEmpty) == CU_GRAPH_NODE_TYPE_EMPTY);
static_assert(static_cast<int>(GraphNodeKind::kEventWait) == CU_GRAPH_NODE_TYPE_WAIT_EVENT);
static_assert(static_cast<int>(GraphNodeKind::kEventRecord) == CU_GRAPH_NODE_TYPE_EVENT_RECORD);
static_assert(static_cast<int>(GraphNodeKind::kExtSemaphoreSignal) ==
              CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL);
static_assert(static_cast<int>(GraphNodeKind::kExtSemaphoreWait) == CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT);
static_assert(static_cast<int>(GraphNodeKind::kMemAlloc) == CU_GRAPH_NODE_TYPE_MEM_ALLOC);
static_assert(static_cast<int>(GraphNodeKind::kMemFree) == CU_GRAPH_NODE_TYPE_MEM_FREE);
static_assert(static_cast<int>(GraphNodeKind::kBatchMemOp) == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP);
static_assert(static_cast<int>(GraphNodeKind::kConditional) == CU_GRAPH_NODE_TYPE_CONDITIONAL);
static_assert(kInstantiateFlagDeviceLaunch == CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH);
static_assert(kInstantiateFlagUseNodePriority == CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY);

Status Check(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return OkStatus();
  return Error(std::string(call) + ": " + CuErrorString(r));
}

template <typename T>
T As(uint64_t h) {
  return reinterpret_cast<T>(static_cast<uintptr_t>(h));
}
template <typename T>
uint64_t H(T p) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
}

}  // namespace

Result<uint64_t> CudaGraphApi::Clone(uint64_t graph) {
  CUgraph c = nullptr;
  Status st = Check(Driver().cuGraphClone(&c, As<CUgraph>(graph)), "cuGraphClone");
  if (!st.ok()) return st;
  return H(c);
}

void CudaGraphApi::Destroy(uint64_t graph) { (void)Driver().cuGraphDestroy(As<CUgraph>(graph)); }

Result<std::vector<uint64_t>> CudaGraphApi::Nodes(uint64_t graph) {
  size_t n = 0;
  Status st = Check(Driver().cuGraphGetNodes(As<CUgraph>(graph), nullptr, &n), "cuGraphGetNodes");
  if (!st.ok()) return st;
  if (n > kMaxGraphNodes) return Error("cuGraphGetNodes: " + std::to_string(n) + " nodes");
  std::vector<CUgraphNode> nodes(n);
  if (n > 0) {
    st = Check(Driver().cuGraphGetNodes(As<CUgraph>(graph), nodes.data(), &n), "cuGraphGetNodes");
    if (!st.ok()) return st;
    nodes.resize(std::min(n, nodes.size()));
  }
  std::vector<uint64_t> out;
  out.reserve(nodes.size());
  for (CUgraphNode node : nodes) out.push_back(H(node));
  return out;
}

Result<std::vector<std::pair<uint64_t, uint64_t>>> CudaGraphApi::Edges(uint64_t graph) {
  size_t n = 0;
  Status st = Check(Driver().cuGraphGetEdges(As<CUgraph>(graph), nullptr, nullptr, nullptr, &n),
                    "cuGraphGetEdges");
  if (!st.ok()) return st;
  if (n > 16 * kMaxGraphNodes) return Error("cuGraphGetEdges: " + std::to_string(n) + " edges");
  std::vector<CUgraphNode> from(n), to(n);
  // Edge data is asked for (a query without it fails on non-default edges);
  // every edge is treated as a full dependency (graph_model.h).
  std::vector<CUgraphEdgeData> data(n);
  if (n > 0) {
    st = Check(Driver().cuGraphGetEdges(As<CUgraph>(graph), from.data(), to.data(), data.data(), &n),
               "cuGraphGetEdges");
    if (!st.ok()) return st;
  }
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (size_t i = 0; i < std::min(n, from.size()); ++i) {
    if (from[i] == nullptr || to[i] == nullptr) continue;
    out.emplace_back(H(from[i]), H(to[i]));
  }
  return out;
}

Result<GraphNodeKind> CudaGraphApi::Kind(uint64_t node) {
  CUgraphNodeType type;
  Status st = Check(Driver().cuGraphNodeGetType(As<CUgraphNode>(node), &type), "cuGraphNodeGetType");
  if (!st.ok()) return st;
  return static_cast<GraphNodeKind>(type);
}

Result<uint64_t> CudaGraphApi::ChildBody(uint64_t node) {
  CUgraph g = nullptr;
  Status st = Check(Driver().cuGraphChildGraphNodeGetGraph(As<CUgraphNode>(node), &g),
                    "cuGraphChildGraphNodeGetGraph");
  if (!st.ok()) return st;
  return H(g);
}

Result<uint64_t> CudaGraphApi::FindInClone(uint64_t original_node, uint64_t clone_graph) {
  CUgraphNode n = nullptr;
  Status st = Check(Driver().cuGraphNodeFindInClone(&n, As<CUgraphNode>(original_node),
                                           As<CUgraph>(clone_graph)),
                    "cuGraphNodeFindInClone");
  if (!st.ok()) return st;
  return H(n);
}

Result<GraphApi::KernelFacts> CudaGraphApi::Kernel(uint64_t node) {
  CUDA_KERNEL_NODE_PARAMS p{};
  Status st = Check(Driver().cuGraphKernelNodeGetParams(As<CUgraphNode>(node), &p),
                    "cuGraphKernelNodeGetParams");
  if (!st.ok()) return st;
  KernelFacts k;
  k.function = p.func != nullptr ? H(p.func) : H(p.kern);
  if (k.function == 0) return Error("cuGraphKernelNodeGetParams: the node names no function");
  CUkernelNodeAttrValue v{};
  // Drivers that predate the attribute reject the query: then no node can be
  // device-updatable either.
  if (Driver().cuGraphKernelNodeGetAttribute(As<CUgraphNode>(node),
                                    CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE,
                                    &v) == CUDA_SUCCESS) {
    k.device_updatable = v.deviceUpdatableKernelNode.deviceUpdatable != 0;
  }
  return k;
}

Status CudaGraphApi::ApplyNodeUpdate(uint64_t clone_node, uint32_t cbid, const void* params) {
  if (params == nullptr) return Error("no parameters");
  CUgraphNode n = As<CUgraphNode>(clone_node);
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams_v2: {
      auto* p = static_cast<const cuGraphExecKernelNodeSetParams_v2_params*>(params);
      if (p->nodeParams == nullptr) return Error("no kernel node parameters");
      return Check(Driver().cuGraphKernelNodeSetParams(n, p->nodeParams), "cuGraphKernelNodeSetParams");
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams: {
      auto* p = static_cast<const cuGraphExecKernelNodeSetParams_params*>(params);
      if (p->nodeParams == nullptr) return Error("no kernel node parameters");
      const CUDA_KERNEL_NODE_PARAMS_v1& a = *p->nodeParams;
      CUDA_KERNEL_NODE_PARAMS b{};
      b.func = a.func;
      b.gridDimX = a.gridDimX;
      b.gridDimY = a.gridDimY;
      b.gridDimZ = a.gridDimZ;
      b.blockDimX = a.blockDimX;
      b.blockDimY = a.blockDimY;
      b.blockDimZ = a.blockDimZ;
      b.sharedMemBytes = a.sharedMemBytes;
      b.kernelParams = a.kernelParams;
      b.extra = a.extra;
      return Check(Driver().cuGraphKernelNodeSetParams(n, &b), "cuGraphKernelNodeSetParams");
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecMemcpyNodeSetParams: {
      auto* p = static_cast<const cuGraphExecMemcpyNodeSetParams_params*>(params);
      if (p->copyParams == nullptr) return Error("no memcpy parameters");
      return Check(Driver().cuGraphMemcpyNodeSetParams(n, p->copyParams), "cuGraphMemcpyNodeSetParams");
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecMemsetNodeSetParams: {
      auto* p = static_cast<const cuGraphExecMemsetNodeSetParams_params*>(params);
      if (p->memsetParams == nullptr) return Error("no memset parameters");
      return Check(Driver().cuGraphMemsetNodeSetParams(n, p->memsetParams), "cuGraphMemsetNodeSetParams");
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecHostNodeSetParams: {
      auto* p = static_cast<const cuGraphExecHostNodeSetParams_params*>(params);
      if (p->nodeParams == nullptr) return Error("no host node parameters");
      return Check(Driver().cuGraphHostNodeSetParams(n, p->nodeParams), "cuGraphHostNodeSetParams");
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecEventRecordNodeSetEvent: {
      auto* p = static_cast<const cuGraphExecEventRecordNodeSetEvent_params*>(params);
      return Check(Driver().cuGraphEventRecordNodeSetEvent(n, p->event), "cuGraphEventRecordNodeSetEvent");
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecEventWaitNodeSetEvent: {
      auto* p = static_cast<const cuGraphExecEventWaitNodeSetEvent_params*>(params);
      return Check(Driver().cuGraphEventWaitNodeSetEvent(n, p->event), "cuGraphEventWaitNodeSetEvent");
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecNodeSetParams: {
      auto* p = static_cast<const cuGraphExecNodeSetParams_params*>(params);
      if (p->nodeParams == nullptr) return Error("no node parameters");
      return Check(Driver().cuGraphNodeSetParams(n, p->nodeParams), "cuGraphNodeSetParams");
    }
    default:
      return Error("exec-level update " + std::to_string(cbid) + " is not replayed by the agent");
  }
}

bool IsGraphTrackingCall(CUpti_CallbackId cbid) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecMemcpyNodeSetParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecMemsetNodeSetParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecHostNodeSetParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecChildGraphNodeSetParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecEventRecordNodeSetEvent:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecEventWaitNodeSetEvent:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecNodeSetParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphNodeSetEnabled:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecDestroy:
    // Nodes an exec of a refused kind cannot be updated (batch mem-op /
    // external semaphore) still refuse the exec: their updates are not replayed.
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecBatchMemOpNodeSetParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecExternalSemaphoresSignalNodeSetParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecExternalSemaphoresWaitNodeSetParams:
      return true;
    default:
      return false;
  }
}

bool TrackGraphCall(CUpti_CallbackId cbid, const void* params, GraphRegistry* registry) {
  if (params == nullptr) return false;
  auto exec_of = [](CUgraphExec* p) { return p != nullptr ? H(*p) : 0; };
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate: {
      auto* p = static_cast<const cuGraphInstantiate_params*>(params);
      registry->OnInstantiate(exec_of(p->phGraphExec), H(p->hGraph), 0);
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2: {
      auto* p = static_cast<const cuGraphInstantiate_v2_params*>(params);
      registry->OnInstantiate(exec_of(p->phGraphExec), H(p->hGraph), 0);
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags: {
      auto* p = static_cast<const cuGraphInstantiateWithFlags_params*>(params);
      registry->OnInstantiate(exec_of(p->phGraphExec), H(p->hGraph), p->flags);
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams_ptsz: {
      static_assert(sizeof(cuGraphInstantiateWithParams_params) ==
                    sizeof(cuGraphInstantiateWithParams_ptsz_params));
      auto* p = static_cast<const cuGraphInstantiateWithParams_params*>(params);
      const uint64_t flags = p->instantiateParams != nullptr ? p->instantiateParams->flags : 0;
      registry->OnInstantiate(exec_of(p->phGraphExec), H(p->hGraph), flags);
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecMemcpyNodeSetParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecMemsetNodeSetParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecHostNodeSetParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecEventRecordNodeSetEvent:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecEventWaitNodeSetEvent:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecBatchMemOpNodeSetParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecExternalSemaphoresSignalNodeSetParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecExternalSemaphoresWaitNodeSetParams: {
      // All of these start with (CUgraphExec hGraphExec, CUgraphNode hNode, ...).
      auto* p = static_cast<const cuGraphExecHostNodeSetParams_params*>(params);
      registry->OnNodeUpdate(H(p->hGraphExec), H(p->hNode), cbid, params);
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecNodeSetParams: {
      auto* p = static_cast<const cuGraphExecNodeSetParams_params*>(params);
      if (p->nodeParams != nullptr && p->nodeParams->type == CU_GRAPH_NODE_TYPE_GRAPH) {
        registry->OnChildGraphUpdate(H(p->hGraphExec), H(p->hNode), H(p->nodeParams->graph.graph));
      } else {
        registry->OnNodeUpdate(H(p->hGraphExec), H(p->hNode), cbid, params);
      }
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecChildGraphNodeSetParams: {
      auto* p = static_cast<const cuGraphExecChildGraphNodeSetParams_params*>(params);
      registry->OnChildGraphUpdate(H(p->hGraphExec), H(p->hNode), H(p->childGraph));
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphNodeSetEnabled: {
      auto* p = static_cast<const cuGraphNodeSetEnabled_params*>(params);
      registry->OnSetEnabled(H(p->hGraphExec), H(p->hNode), p->isEnabled != 0);
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate: {
      auto* p = static_cast<const cuGraphExecUpdate_params*>(params);
      registry->OnExecUpdate(H(p->hGraphExec), H(p->hGraph));
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate_v2: {
      auto* p = static_cast<const cuGraphExecUpdate_v2_params*>(params);
      registry->OnExecUpdate(H(p->hGraphExec), H(p->hGraph));
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecDestroy:
      // Dropped at the call's ENTER (the handle may be reused right after).
      return true;
    default:
      return false;
  }
}

}  // namespace kerncap::agent::cuda
