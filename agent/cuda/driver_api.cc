#include "agent/cuda/driver_api.h"

#include <mutex>

namespace kerncap::agent::cuda {
namespace {

template <typename Fn>
void Resolve(const char* name, Fn* fn) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult status;
  if (cuGetProcAddress(name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) ==
          CUDA_SUCCESS &&
      status == CU_GET_PROC_ADDRESS_SUCCESS) {
    *fn = reinterpret_cast<Fn>(p);
  }
}

}  // namespace

const DriverApi& Driver() {
  static DriverApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    Resolve("cuFuncGetName", &api.FuncGetName);
    Resolve("cuKernelGetName", &api.KernelGetName);
    Resolve("cuFuncGetParamInfo", &api.FuncGetParamInfo);
    Resolve("cuKernelGetParamInfo", &api.KernelGetParamInfo);
    Resolve("cuFuncLoad", &api.FuncLoad);
    Resolve("cuKernelGetFunction", &api.KernelGetFunction);
    Resolve("cuKernelGetAttribute", &api.KernelGetAttribute);
    Resolve("cuKernelGetLibrary", &api.KernelGetLibrary);
    Resolve("cuLibraryGetGlobal", &api.LibraryGetGlobal);
  });
  return api;
}

std::string CuErrorString(CUresult r) {
  const char* name = nullptr;
  if (cuGetErrorName(r, &name) != CUDA_SUCCESS || name == nullptr) name = "CUDA_ERROR_?";
  return std::string(name) + " (" + std::to_string(static_cast<int>(r)) + ")";
}

}  // namespace kerncap::agent::cuda
