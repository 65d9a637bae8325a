// driver_api.h: CUDA driver entry points newer than the agent's minimum
// driver (12.0), resolved at run time through cuGetProcAddress so that the
// agent still loads (and degrades) on older drivers. Older entry points are
// linked normally against libcuda.so.1.
//
// Introduced in (found by asking cuGetProcAddress for each version, CUDA 13.0 driver 580):
//   cuFuncGetName, cuKernelGetName             12.3
//   cuFuncGetParamInfo, cuKernelGetParamInfo   12.4
//   cuFuncLoad, cuFuncIsLoaded                 12.4
//   cuKernelGetLibrary                         12.5
//   cuKernelGetFunction, cuLibraryGetGlobal    12.0
#ifndef KERNCAP_AGENT_CUDA_DRIVER_API_H_
#define KERNCAP_AGENT_CUDA_DRIVER_API_H_

#include <cuda.h>

#include <string>

namespace kerncap::agent::cuda {

struct DriverApi {
  CUresult (*FuncGetName)(const char**, CUfunction) = nullptr;
  CUresult (*KernelGetName)(const char**, CUkernel) = nullptr;
  CUresult (*FuncGetParamInfo)(CUfunction, size_t, size_t*, size_t*) = nullptr;
  CUresult (*KernelGetParamInfo)(CUkernel, size_t, size_t*, size_t*) = nullptr;
  CUresult (*FuncLoad)(CUfunction) = nullptr;
  CUresult (*KernelGetFunction)(CUfunction*, CUkernel) = nullptr;
  CUresult (*KernelGetAttribute)(int*, CUfunction_attribute, CUkernel, CUdevice) = nullptr;
  CUresult (*KernelGetLibrary)(CUlibrary*, CUkernel) = nullptr;
  CUresult (*LibraryGetGlobal)(CUdeviceptr*, size_t*, CUlibrary, const char*) = nullptr;
};

// Resolved on first call (after cuInit); entries the driver lacks stay null.
const DriverApi& Driver();

// "CUDA_ERROR_INVALID_VALUE (1)".
std::string CuErrorString(CUresult r);

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_DRIVER_API_H_
