// driver_api.h: every CUDA driver entry point the agent calls, resolved at
// run time from libcuda.so.1 (common/cuda/driver_library.h): the agent library
// has no link dependency on the driver, so loading it into a process on a
// host without one changes nothing (the agent stays inactive).
//
//   Driver().cuCtxGetCurrent(&ctx)   the table's members have cuda.h's names
//
// Two kinds of entries:
//   required   KC_AGENT_CUDA_DRIVER_FUNCTIONS, looked up by the symbol name
//              cuda.h maps each to (cuDeviceTotalMem -> cuDeviceTotalMem_v2),
//              so each pointer has exactly the ABI compiled against. All must
//              be there, else the agent stays inactive and says which are
//              missing (the newest, cuGraphGetEdges_v2, is CUDA 12.3).
//   optional   newer than some supported drivers, resolved through
//              cuGetProcAddress; null when the driver lacks them. Introduced
//              in (found by asking cuGetProcAddress for each version, CUDA
//              13.0 driver 580):
//                cuFuncGetName, cuKernelGetName             12.3
//                cuFuncGetParamInfo, cuKernelGetParamInfo   12.4
//                cuFuncLoad, cuFuncIsLoaded                 12.4
//                cuKernelGetLibrary                         12.5
//                cuKernelGetFunction, cuLibraryGetGlobal    12.0
//                cuEventElapsedTime (newest ABI)            any
#ifndef KERNCAP_AGENT_CUDA_DRIVER_API_H_
#define KERNCAP_AGENT_CUDA_DRIVER_API_H_

#include <cuda.h>

#include <string>

namespace kerncap::agent::cuda {

#define KC_AGENT_CUDA_DRIVER_FUNCTIONS(X)                                                   \
  X(cuGetProcAddress) X(cuGetErrorName)                              \
  /* devices and contexts */                                                               \
  X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName) X(cuDeviceGetAttribute)            \
  X(cuDeviceGetPCIBusId) X(cuDeviceGetUuid) X(cuDeviceTotalMem)                            \
  X(cuDevicePrimaryCtxGetState) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)   \
  X(cuCtxGetCurrent) X(cuCtxGetDevice) X(cuCtxPushCurrent) X(cuCtxPopCurrent)              \
  X(cuCtxSynchronize)                                                                      \
  /* memory, modules, functions, streams */                                                \
  X(cuMemGetAddressRange) X(cuMemHostRegister) X(cuMemHostUnregister) X(cuMemcpyDtoH)     \
  X(cuModuleGetGlobal) X(cuFuncGetAttribute) X(cuFuncGetModule) X(cuStreamIsCapturing)     \
  X(cuStreamSynchronize) X(cuStreamWaitEvent) X(cuEventRecord)                             \
  /* graphs: tracking, node-by-node execution (graph_driver.h, graph_executor.h) */        \
  X(cuGraphClone) X(cuGraphCreate) X(cuGraphDestroy) X(cuGraphGetNodes) X(cuGraphGetEdges) \
  X(cuGraphNodeGetType) X(cuGraphNodeFindInClone) X(cuGraphChildGraphNodeGetGraph)         \
  X(cuGraphKernelNodeGetParams) X(cuGraphKernelNodeSetParams)                              \
  X(cuGraphKernelNodeGetAttribute) X(cuGraphMemcpyNodeGetParams)                           \
  X(cuGraphMemcpyNodeSetParams) X(cuGraphMemsetNodeGetParams) X(cuGraphMemsetNodeSetParams) \
  X(cuGraphHostNodeGetParams) X(cuGraphHostNodeSetParams) X(cuGraphEventRecordNodeGetEvent) \
  X(cuGraphEventRecordNodeSetEvent) X(cuGraphEventWaitNodeGetEvent)                        \
  X(cuGraphEventWaitNodeSetEvent) X(cuGraphNodeSetParams) X(cuGraphInstantiate)            \
  X(cuGraphLaunch) X(cuLaunchKernelEx) X(cuLaunchHostFunc) X(cuMemcpy3DAsync)              \
  X(cuMemsetD8Async) X(cuMemsetD16Async) X(cuMemsetD32Async) X(cuMemsetD2D8Async)          \
  X(cuMemsetD2D16Async) X(cuMemsetD2D32Async)                                              \
  /* device snapshots (cuda_snapshot.h) */                                                 \
  X(cuMemGetInfo) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyAsync) X(cuMemcpyDtoHAsync)         \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuModuleLoadData) X(cuModuleGetFunction)          \
  X(cuLaunchKernel) X(cuCtxSetCurrent)                                                     \
  /* live substitution (cuda_substitution.h) */                                            \
  X(cuEventCreate) X(cuEventQuery) X(cuEventSynchronize) X(cuEventDestroy)

struct DriverApi {
#define KC_AGENT_CUDA_DECLARE(name) decltype(&::name) name = nullptr;
  KC_AGENT_CUDA_DRIVER_FUNCTIONS(KC_AGENT_CUDA_DECLARE)
#undef KC_AGENT_CUDA_DECLARE

  // Optional (see above): null when the driver lacks them.
  CUresult (*FuncGetName)(const char**, CUfunction) = nullptr;
  CUresult (*KernelGetName)(const char**, CUkernel) = nullptr;
  CUresult (*FuncGetParamInfo)(CUfunction, size_t, size_t*, size_t*) = nullptr;
  CUresult (*KernelGetParamInfo)(CUkernel, size_t, size_t*, size_t*) = nullptr;
  CUresult (*FuncLoad)(CUfunction) = nullptr;
  CUresult (*KernelGetFunction)(CUfunction*, CUkernel) = nullptr;
  CUresult (*KernelGetAttribute)(int*, CUfunction_attribute, CUkernel, CUdevice) = nullptr;
  CUresult (*KernelGetLibrary)(CUlibrary*, CUkernel) = nullptr;
  CUresult (*LibraryGetGlobal)(CUdeviceptr*, size_t*, CUlibrary, const char*) = nullptr;
  // cuda.h 13 maps cuEventElapsedTime to _v2 (driver 12.8+); through
  // cuGetProcAddress an older driver gives its own (same signature).
  CUresult (*EventElapsedTime)(float*, CUevent, CUevent) = nullptr;

  int version = 0;  // the CUDA version the driver supports (cuDriverGetVersion), e.g. 13000
};

// Opens the driver and resolves the table, once per process. False when there
// is no driver or it lacks a required entry point; *why says which (and
// stays the same on later calls).
bool LoadDriverApi(std::string* why);

// The table LoadDriverApi filled. Only code that runs after a successful
// LoadDriverApi (CUPTI callbacks, captures) may call through it. The first
// call resolves the optional entries (cuGetProcAddress): not inside cuInit.
const DriverApi& Driver();

// DriverApi::version without resolving anything (0 before LoadDriverApi).
int DriverVersion();

// "CUDA_ERROR_INVALID_VALUE (1)".
std::string CuErrorString(CUresult r);

// True while `stream` is being captured into a graph (work launched into it
// then does not run now), and when the driver cannot tell.
bool StreamBeingCaptured(CUstream stream);

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_DRIVER_API_H_
