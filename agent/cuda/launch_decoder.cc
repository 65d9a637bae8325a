#include "agent/cuda/launch_decoder.h"

#include <cupti.h>  // includes generated_cuda_meta.h (which has no include guard)

#include <string>

namespace kerncap::agent::cuda {
namespace {

// The _ptsz variants carry the same fields in the same order.
static_assert(sizeof(cuLaunchKernel_params) == sizeof(cuLaunchKernel_ptsz_params));
static_assert(sizeof(cuLaunchKernelEx_params) == sizeof(cuLaunchKernelEx_ptsz_params));
static_assert(sizeof(cuLaunchCooperativeKernel_params) ==
              sizeof(cuLaunchCooperativeKernel_ptsz_params));

template <typename P>
void FillClassic(const P* p, LaunchCall* call) {
  call->function = p->f;
  call->stream = p->hStream;
  call->kernel_params = p->kernelParams;
  call->desc.grid = {p->gridDimX, p->gridDimY, p->gridDimZ};
  call->desc.block = {p->blockDimX, p->blockDimY, p->blockDimZ};
  call->desc.shared_mem_bytes = p->sharedMemBytes;
}

void FillEx(const cuLaunchKernelEx_params* p, LaunchCall* call) {
  call->function = p->f;
  call->kernel_params = p->kernelParams;
  call->extra = p->extra;
  const CUlaunchConfig* c = p->config;
  if (c == nullptr) return;
  call->stream = c->hStream;
  call->desc.grid = {c->gridDimX, c->gridDimY, c->gridDimZ};
  call->desc.block = {c->blockDimX, c->blockDimY, c->blockDimZ};
  call->desc.shared_mem_bytes = c->sharedMemBytes;
  for (unsigned i = 0; c->attrs != nullptr && i < c->numAttrs; ++i) {
    const CUlaunchAttribute& a = c->attrs[i];
    auto& attrs = call->desc.attributes;
    switch (a.id) {
      case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
        call->desc.cooperative = a.value.cooperative != 0;
        break;
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        call->desc.cluster = {a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z};
        break;
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        attrs["launch.cluster_scheduling_policy"] = a.value.clusterSchedulingPolicyPreference;
        break;
      case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        attrs["launch.programmatic_stream_serialization"] =
            a.value.programmaticStreamSerializationAllowed;
        break;
      case CU_LAUNCH_ATTRIBUTE_PRIORITY:
        attrs["launch.priority"] = a.value.priority;
        break;
      case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
        attrs["launch.mem_sync_domain"] = a.value.memSyncDomain;
        break;
      case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        attrs["launch.preferred_shared_memory_carveout"] = a.value.sharedMemCarveout;
        break;
      case CU_LAUNCH_ATTRIBUTE_IGNORE:
        break;
      default:
        // Recorded so replay can at least say what it does not re-apply.
        attrs["launch.attr_" + std::to_string(static_cast<int>(a.id))] = 1;
        break;
    }
  }
}

}  // namespace

bool IsKernelLaunch(CUpti_CallbackId cbid) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      return true;
    default:
      return false;
  }
}

bool IsGraphLaunch(CUpti_CallbackId cbid) {
  return cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz;
}

CUstream LaunchStream(const LaunchCall& call) {
  return call.per_thread_stream && call.stream == nullptr ? CU_STREAM_PER_THREAD : call.stream;
}

CUstream GraphLaunchStream(CUpti_CallbackId cbid, const cuGraphLaunch_params& params) {
  return params.hStream == nullptr && cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz
             ? CU_STREAM_PER_THREAD
             : params.hStream;
}

std::optional<LaunchCall> DecodeLaunch(CUpti_CallbackId cbid, const void* params) {
  if (params == nullptr) return std::nullopt;
  LaunchCall call;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      call.per_thread_stream = true;
      [[fallthrough]];
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: {
      auto* p = static_cast<const cuLaunchKernel_params*>(params);
      FillClassic(p, &call);
      call.extra = p->extra;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      call.per_thread_stream = true;
      [[fallthrough]];
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
      FillEx(static_cast<const cuLaunchKernelEx_params*>(params), &call);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      call.per_thread_stream = true;
      [[fallthrough]];
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
      FillClassic(static_cast<const cuLaunchCooperativeKernel_params*>(params), &call);
      call.desc.cooperative = true;
      break;
    default:
      return std::nullopt;
  }
  call.desc.stream = reinterpret_cast<uint64_t>(call.stream);
  return call;
}

bool SetLaunchFunction(CUpti_CallbackId cbid, void* params, CUfunction f) {
  if (params == nullptr) return false;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      static_cast<cuLaunchKernel_params*>(params)->f = f;
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
      static_cast<cuLaunchKernelEx_params*>(params)->f = f;
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
      static_cast<cuLaunchCooperativeKernel_params*>(params)->f = f;
      return true;
    default:
      return false;
  }
}

}  // namespace kerncap::agent::cuda
