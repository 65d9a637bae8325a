// param_blob.h: assembling a kernel's argument blob at launch time.
//
// The blob is byte-identical to the device-side parameter buffer (constant
// bank 0 of the launch): parameter i's `size` bytes at its `offset`, gaps
// (alignment padding) zero. Replay can pass it back unchanged through
// cuLaunchKernel's `extra` = {CU_LAUNCH_PARAM_BUFFER_POINTER, blob,
// CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END}.
//
// The application passes arguments in exactly one of two forms:
//   kernelParams: void*[N], entry i points at the value of parameter i
//                 (needs the layout from cuFuncGetParamInfo / cuKernelGetParamInfo)
//   extra:        a key/value list naming a ready-made buffer and its size.
#ifndef KERNCAP_AGENT_CUDA_PARAM_BLOB_H_
#define KERNCAP_AGENT_CUDA_PARAM_BLOB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "agent/core/status.h"

namespace kerncap::agent::cuda {

struct ParamInfo {
  uint32_t offset = 0;
  uint32_t size = 0;
};

// Device-side limit of the parameter buffer (32764 bytes on sm_70+ with
// CUDA 12.1+); anything larger is a corrupt layout.
inline constexpr uint64_t kMaxParamBytes = 32764;

// Copies kernelParams[i] (layout[i].size bytes) to blob offset layout[i].offset.
Result<std::string> BlobFromKernelParams(void* const* kernel_params,
                                         const std::vector<ParamInfo>& layout);

// Reads CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE from an `extra` list (terminated
// by CU_LAUNCH_PARAM_END).
Result<std::string> BlobFromExtra(void* const* extra);

// Picks the form the application used. A kernel with no parameters yields an
// empty blob.
Result<std::string> AssembleParamBlob(void* const* kernel_params, void* const* extra,
                                      const std::vector<ParamInfo>& layout);

// Live substitution's safety check: the variant must take exactly the
// original's parameters (same count, and each at the same offset with the
// same size), so the application's kernelParams / extra buffer mean the same
// to it. Empty when they match, else what differs first.
std::string CompareParamLayouts(const std::vector<ParamInfo>& original,
                                const std::vector<ParamInfo>& variant);

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_PARAM_BLOB_H_
