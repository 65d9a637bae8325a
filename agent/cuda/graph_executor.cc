#include "agent/cuda/graph_executor.h"

#include <new>
#include <string>

#include "agent/cuda/driver_api.h"

namespace kerncap::agent::cuda {
namespace {

Status Check(CUresult r, const std::string& call) {
  if (r == CUDA_SUCCESS) return OkStatus();
  return Error(call + ": " + CuErrorString(r));
}

// A compile-time cluster shape (__cluster_dims__) may not be given again at
// launch; the node's attribute then only repeats it.
bool HasCompiledClusterDims(CUfunction f) {
  int width = 0;
  if (Driver().cuFuncGetAttribute(&width, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, f) == CUDA_SUCCESS) {
    return width > 0;
  }
  // A CUkernel handle: ask through the kernel API for this context's device.
  const DriverApi& api = Driver();
  CUdevice dev = 0;
  if (api.KernelGetAttribute != nullptr && Driver().cuCtxGetDevice(&dev) == CUDA_SUCCESS &&
      api.KernelGetAttribute(&width, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
                             reinterpret_cast<CUkernel>(f), dev) == CUDA_SUCCESS) {
    return width > 0;
  }
  return false;
}

Status PrepareKernel(CUgraphNode node, const GraphLaunchPlan& plan, CUcontext launch_context,
                     EagerOp* op) {
  CUDA_KERNEL_NODE_PARAMS p{};
  KC_AGENT_RETURN_IF_ERROR(Check(Driver().cuGraphKernelNodeGetParams(node, &p), "cuGraphKernelNodeGetParams"));
  if (p.func != nullptr) {
    op->function = p.func;
  } else if (p.kern != nullptr) {
    if (p.ctx != nullptr && launch_context != nullptr && p.ctx != launch_context) {
      return Error("the kernel node runs in another context than the launch stream's");
    }
    op->function = reinterpret_cast<CUfunction>(p.kern);
  } else {
    return Error("the kernel node names no function");
  }
  // One form only (cuLaunchKernelEx rejects both); the driver's copy of the
  // arguments is in kernelParams when it has one.
  op->kernel_params = p.kernelParams;
  op->extra = p.kernelParams != nullptr ? nullptr : p.extra;
  LaunchDesc& d = op->desc;
  d.grid = {p.gridDimX, p.gridDimY, p.gridDimZ};
  d.block = {p.blockDimX, p.blockDimY, p.blockDimZ};
  d.shared_mem_bytes = p.sharedMemBytes;

  auto get = [&](CUlaunchAttributeID id, CUlaunchAttributeValue* v) {
    *v = CUlaunchAttributeValue{};
    return Driver().cuGraphKernelNodeGetAttribute(node, id, v) == CUDA_SUCCESS;
  };
  auto add = [&](CUlaunchAttributeID id, const CUlaunchAttributeValue& v) {
    CUlaunchAttribute a{};
    a.id = id;
    a.value = v;
    op->attrs.push_back(a);
  };
  CUlaunchAttributeValue v;
  if (get(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &v) &&
      static_cast<uint64_t>(v.clusterDim.x) * v.clusterDim.y * v.clusterDim.z > 1) {
    d.cluster = {v.clusterDim.x, v.clusterDim.y, v.clusterDim.z};
    if (!HasCompiledClusterDims(op->function)) add(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, v);
  }
  if (get(CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION, &v) &&
      static_cast<uint64_t>(v.preferredClusterDim.x) * v.preferredClusterDim.y *
              v.preferredClusterDim.z > 1) {
    add(CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION, v);
    d.attributes["launch.preferred_cluster_x"] = v.preferredClusterDim.x;
  }
  if (get(CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, &v) &&
      v.clusterSchedulingPolicyPreference != CU_CLUSTER_SCHEDULING_POLICY_DEFAULT) {
    add(CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, v);
    d.attributes["launch.cluster_scheduling_policy"] = v.clusterSchedulingPolicyPreference;
  }
  if (get(CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v) && v.cooperative != 0) {
    add(CU_LAUNCH_ATTRIBUTE_COOPERATIVE, v);
    d.cooperative = true;
  }
  if ((plan.flags & kInstantiateFlagUseNodePriority) != 0 && get(CU_LAUNCH_ATTRIBUTE_PRIORITY, &v)) {
    add(CU_LAUNCH_ATTRIBUTE_PRIORITY, v);
    d.attributes["launch.priority"] = v.priority;
  }
  // The node's memory-synchronization domain (copied from the stream when the
  // graph was captured) is what the graph would use.
  if (get(CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, &v)) {
    add(CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, v);
    if (v.memSyncDomain != CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT) {
      d.attributes["launch.mem_sync_domain"] = v.memSyncDomain;
    }
  }
  if (get(CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, &v)) add(CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, v);
  if (get(CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v) && v.accessPolicyWindow.num_bytes > 0) {
    add(CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, v);
  }
  return OkStatus();
}

Status PrepareOne(const FlatNode& n, const GraphLaunchPlan& plan, CUcontext launch_context,
                  EagerOp* op) {
  op->kind = n.kind;
  op->run = n.enabled && n.kind != GraphNodeKind::kEmpty;
  if (!op->run) return OkStatus();
  CUgraphNode node = reinterpret_cast<CUgraphNode>(static_cast<uintptr_t>(n.handle));
  switch (n.kind) {
    case GraphNodeKind::kKernel:
      return PrepareKernel(node, plan, launch_context, op);
    case GraphNodeKind::kMemcpy:
      return Check(Driver().cuGraphMemcpyNodeGetParams(node, &op->copy), "cuGraphMemcpyNodeGetParams");
    case GraphNodeKind::kMemset: {
      KC_AGENT_RETURN_IF_ERROR(
          Check(Driver().cuGraphMemsetNodeGetParams(node, &op->memset), "cuGraphMemsetNodeGetParams"));
      const unsigned e = op->memset.elementSize;
      if (e != 1 && e != 2 && e != 4) {
        return Error("memset element size " + std::to_string(e) + " (expected 1, 2 or 4)");
      }
      if (op->memset.height > 1 && op->memset.pitch < op->memset.width * e) {
        return Error("2D memset with a pitch below its row width");
      }
      return OkStatus();
    }
    case GraphNodeKind::kHost:
      KC_AGENT_RETURN_IF_ERROR(
          Check(Driver().cuGraphHostNodeGetParams(node, &op->host), "cuGraphHostNodeGetParams"));
      if (op->host.fn == nullptr) return Error("the host node has no function");
      return OkStatus();
    case GraphNodeKind::kEventRecord:
      KC_AGENT_RETURN_IF_ERROR(
          Check(Driver().cuGraphEventRecordNodeGetEvent(node, &op->event), "cuGraphEventRecordNodeGetEvent"));
      return op->event != nullptr ? OkStatus() : Error("the event record node has no event");
    case GraphNodeKind::kEventWait:
      KC_AGENT_RETURN_IF_ERROR(
          Check(Driver().cuGraphEventWaitNodeGetEvent(node, &op->event), "cuGraphEventWaitNodeGetEvent"));
      return op->event != nullptr ? OkStatus() : Error("the event wait node has no event");
    default:
      // UnsupportedNodeReason refused these before; never run what is not understood.
      return Error("a " + GraphNodeKindName(n.kind) + " node cannot be run node by node");
  }
}

}  // namespace

Status PrepareEagerOp(const FlatNode& node, const GraphLaunchPlan& plan, CUcontext launch_context,
                      EagerOp* op) {
  return PrepareOne(node, plan, launch_context, op);
}

Result<std::vector<EagerOp>> PrepareEagerRun(const GraphLaunchPlan& plan, CUcontext launch_context) {
  if (!plan.unsupported.empty()) return Error(plan.unsupported);
  const std::vector<FlatNode>& nodes = plan.nodes();
  std::vector<EagerOp> ops(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    Status st = PrepareOne(nodes[i], plan, launch_context, &ops[i]);
    if (!st.ok()) {
      return Error("node " + PathString(nodes[i].path) + " (" + GraphNodeKindName(nodes[i].kind) +
                   "): " + st.message());
    }
  }
  return ops;
}

Status EnqueueEagerOp(const EagerOp& op, CUstream stream) {
  if (!op.run) return OkStatus();
  switch (op.kind) {
    case GraphNodeKind::kKernel: {
      CUlaunchConfig cfg{};
      cfg.gridDimX = op.desc.grid[0];
      cfg.gridDimY = op.desc.grid[1];
      cfg.gridDimZ = op.desc.grid[2];
      cfg.blockDimX = op.desc.block[0];
      cfg.blockDimY = op.desc.block[1];
      cfg.blockDimZ = op.desc.block[2];
      cfg.sharedMemBytes = op.desc.shared_mem_bytes;
      cfg.hStream = stream;
      cfg.attrs = const_cast<CUlaunchAttribute*>(op.attrs.data());
      cfg.numAttrs = static_cast<unsigned>(op.attrs.size());
      return Check(Driver().cuLaunchKernelEx(&cfg, op.function, op.kernel_params, op.extra), "cuLaunchKernelEx");
    }
    case GraphNodeKind::kMemcpy:
      return Check(Driver().cuMemcpy3DAsync(&op.copy, stream), "cuMemcpy3DAsync");
    case GraphNodeKind::kMemset: {
      const CUDA_MEMSET_NODE_PARAMS& m = op.memset;
      if (m.height <= 1) {
        switch (m.elementSize) {
          case 1: return Check(Driver().cuMemsetD8Async(m.dst, static_cast<unsigned char>(m.value), m.width, stream), "cuMemsetD8Async");
          case 2: return Check(Driver().cuMemsetD16Async(m.dst, static_cast<unsigned short>(m.value), m.width, stream), "cuMemsetD16Async");
          default: return Check(Driver().cuMemsetD32Async(m.dst, m.value, m.width, stream), "cuMemsetD32Async");
        }
      }
      switch (m.elementSize) {
        case 1: return Check(Driver().cuMemsetD2D8Async(m.dst, m.pitch, static_cast<unsigned char>(m.value), m.width, m.height, stream), "cuMemsetD2D8Async");
        case 2: return Check(Driver().cuMemsetD2D16Async(m.dst, m.pitch, static_cast<unsigned short>(m.value), m.width, m.height, stream), "cuMemsetD2D16Async");
        default: return Check(Driver().cuMemsetD2D32Async(m.dst, m.pitch, m.value, m.width, m.height, stream), "cuMemsetD2D32Async");
      }
    }
    case GraphNodeKind::kHost:
      return Check(Driver().cuLaunchHostFunc(stream, op.host.fn, op.host.userData), "cuLaunchHostFunc");
    case GraphNodeKind::kEventRecord:
      return Check(Driver().cuEventRecord(op.event, stream), "cuEventRecord");
    case GraphNodeKind::kEventWait:
      return Check(Driver().cuStreamWaitEvent(stream, op.event, 0), "cuStreamWaitEvent");
    default:
      return Error("a " + GraphNodeKindName(op.kind) + " node cannot be run node by node");
  }
}

Result<CUgraphExec> EmptyExecs::For(CUcontext context) {
  std::lock_guard lock(mu_);
  auto it = execs_.find(context);
  if (it != execs_.end()) return it->second;
  CUgraph g = nullptr;
  Status st = Check(Driver().cuGraphCreate(&g, 0), "cuGraphCreate");
  if (!st.ok()) return st;
  CUgraphExec e = nullptr;
  st = Check(Driver().cuGraphInstantiate(&e, g, 0), "cuGraphInstantiate");
  (void)Driver().cuGraphDestroy(g);  // the exec does not need its graph
  if (!st.ok()) return st;
  execs_[context] = e;
  return e;
}

void EmptyExecs::ResetAfterFork() {
  new (&mu_) std::mutex();
  execs_.clear();
}

}  // namespace kerncap::agent::cuda
