// launch_decoder.h: turns the parameter struct of a CUPTI launch callback
// (generated_cuda_meta.h) into one backend-level description of the launch.
// Pure data conversion, unit-tested without a GPU.
#ifndef KERNCAP_AGENT_CUDA_LAUNCH_DECODER_H_
#define KERNCAP_AGENT_CUDA_LAUNCH_DECODER_H_

#include <cuda.h>
#include <cupti.h>

#include <optional>

#include "agent/core/capture_types.h"

namespace kerncap::agent::cuda {

struct LaunchCall {
  CUfunction function = nullptr;
  CUstream stream = nullptr;
  bool per_thread_stream = false;  // a _ptsz entry point: stream 0 = per-thread default
  void** kernel_params = nullptr;
  void** extra = nullptr;
  LaunchDesc desc;  // grid, block, shared memory, cluster, cooperative, launch attributes
};

// True for the kernel launch entry points the agent captures.
bool IsKernelLaunch(CUpti_CallbackId cbid);
// True for cuGraphLaunch(_ptsz) (armed: see CudaAgent::OnGraphLaunchEnter).
bool IsGraphLaunch(CUpti_CallbackId cbid);

// nullopt when cbid is not a kernel launch.
std::optional<LaunchCall> DecodeLaunch(CUpti_CallbackId cbid, const void* params);

// The stream a launch runs on: stream 0 of a _ptsz entry point is the
// per-thread default stream.
CUstream LaunchStream(const LaunchCall& call);
// The same for a cuGraphLaunch(_ptsz) parameter struct.
CUstream GraphLaunchStream(CUpti_CallbackId cbid, const cuGraphLaunch_params& params);

// Overwrites the function of a launch's parameter struct in its ENTER
// callback, so the driver launches `f` instead (live substitution; the same
// way the graph path swaps hGraph). False when cbid is not a kernel launch.
bool SetLaunchFunction(CUpti_CallbackId cbid, void* params, CUfunction f);

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_LAUNCH_DECODER_H_
