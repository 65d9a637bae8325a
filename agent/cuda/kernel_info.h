// kernel_info.h: per-function facts the agent needs at an armed launch
// (name, demangled name, parameter layout), resolved once per handle.
//
// Handle kinds: the CUDA runtime passes CUkernel handles cast to CUfunction
// into cuLaunchKernel; on those cuFuncGetName / cuFuncGetParamInfo fail and
// the cuKernel* variants work (measured). Triton passes real CUfunctions. So
// the Func variant is tried first, then the Kernel variant, and the one that
// worked is recorded. There is no GetParamCount: parameters are counted by
// asking for increasing indices until the call fails.
#ifndef KERNCAP_AGENT_CUDA_KERNEL_INFO_H_
#define KERNCAP_AGENT_CUDA_KERNEL_INFO_H_

#include <cuda.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/cuda/param_blob.h"

namespace kerncap::agent::cuda {

struct KernelInfo {
  std::string mangled_name;
  std::string demangled_name;  // == mangled_name when it does not demangle
  bool is_kernel_handle = false;  // the handle is a CUkernel (cuKernel* worked)
  bool params_known = false;
  std::vector<ParamInfo> params;
};

// abi::__cxa_demangle, or `mangled` unchanged.
std::string Demangle(const std::string& mangled);

class KernelInfoCache {
 public:
  // `fallback_name` (CUPTI's symbolName for the launch) is used when neither
  // name API works (drivers < 12.3).
  std::shared_ptr<const KernelInfo> Get(CUfunction f, const char* fallback_name);
  void Clear();

 private:
  static std::shared_ptr<KernelInfo> Resolve(CUfunction f, const char* fallback_name);

  std::mutex mu_;
  std::unordered_map<CUfunction, std::shared_ptr<const KernelInfo>> cache_;
};

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_KERNEL_INFO_H_
