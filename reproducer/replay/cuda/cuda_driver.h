// cuda_driver.h: the CUDA driver API entry points kerncap-replay uses,
// resolved at run time through the one driver loader
// (common/cuda/driver_library.h: dlopen("libcuda.so.1") and dlsym of the
// symbol cuda.h maps each function to). Loading at run time instead of
// linking the stub lets the binary start on machines without a driver and
// say so, and lets tests skip.
#ifndef KERNCAP_REPRODUCER_REPLAY_CUDA_CUDA_DRIVER_H_
#define KERNCAP_REPRODUCER_REPLAY_CUDA_CUDA_DRIVER_H_

#include <cuda.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kerncap::replay {

// X-macro list: X(name) for each driver function, by API name; the member
// and the symbol take the name cuda.h's macros give it (cuMemAlloc_v2, ...).
#define KC_CUDA_DRIVER_FUNCTIONS(X)                                                        \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName)  \
  X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)        \
  X(cuCtxSetCurrent) X(cuCtxSynchronize) X(cuMemGetAllocationGranularity)                 \
  X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease) X(cuMemMap)   \
  X(cuMemUnmap) X(cuMemSetAccess) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemsetD8)           \
  X(cuMemcpyHtoDAsync) X(cuMemsetD8Async)                                                \
  X(cuMemsetD32Async) X(cuMemAlloc) X(cuMemFree) X(cuMemHostRegister)                     \
  X(cuMemHostUnregister) X(cuMemHostGetDevicePointer) X(cuMemAllocHost) X(cuMemFreeHost)  \
  X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuModuleGetGlobal)       \
  X(cuFuncSetAttribute) X(cuFuncGetAttribute) X(cuLaunchKernel) X(cuLaunchKernelEx)       \
  X(cuFuncSetCacheConfig) /* launch overrides (core/launch_override.h) */                 \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuEventCreate)            \
  X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime)          \
  X(cuGetErrorName) X(cuGetErrorString)                                                   \
  /* resident mode (serve/): pristine copies, candidate modules, device comparison */    \
  X(cuMemcpyDtoD) X(cuMemcpyDtoDAsync) X(cuMemcpyDtoHAsync) X(cuModuleLoadDataEx)        \
  X(cuMemGetInfo) X(cuStreamQuery)                                                        \
  /* texture and surface objects (texture_objects.h) */                                  \
  X(cuTexObjectCreate) X(cuTexObjectDestroy) X(cuSurfObjectCreate) X(cuSurfObjectDestroy) \
  /* benchmarks: the persisting-L2 state they time with (l2_control.h) */                 \
  X(cuCtxSetLimit) X(cuCtxGetLimit) X(cuCtxResetPersistingL2Cache) X(cuStreamSetAttribute) \
  X(cuStreamGetAttribute)

struct CudaDriver {
#define KC_CUDA_DECLARE(name) decltype(&::name) name = nullptr;
  KC_CUDA_DRIVER_FUNCTIONS(KC_CUDA_DECLARE)
#undef KC_CUDA_DECLARE

  // Loads libcuda.so.1 and resolves every function (once per process).
  // FailedPrecondition with the dlopen message when there is no driver.
  static absl::StatusOr<const CudaDriver*> Get();

  // "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
  std::string ErrorText(CUresult r) const;
  // OkStatus for CUDA_SUCCESS, else Internal "<what>: <ErrorText>".
  absl::Status Check(CUresult r, const std::string& what) const;
};

// True for the errors that mean there is no CUDA driver or no CUDA device
// here (CudaDriver::Get, a device count of 0, CUDA_ERROR_NO_DEVICE). The
// replay tools report them as "skipped" (exit 77), never as failures.
bool IsNoCudaDeviceError(const absl::Status& s);

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CUDA_CUDA_DRIVER_H_
