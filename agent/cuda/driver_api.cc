#include "agent/cuda/driver_api.h"

#include <mutex>

#include "common/cuda/driver_library.h"

namespace kerncap::agent::cuda {
namespace {

// Built on first use and leaked: the library constructor (injection.cc) fills
// it before this file's dynamic initializers are guaranteed to have run, and a
// namespace-scope table with a non-trivial member would be initialized again
// (emptied) after it: every call through it would then jump to null.
DriverApi& DriverTable() {
  static DriverApi* table = new DriverApi();
  return *table;
}

template <typename Fn>
void ResolveOptional(const char* name, Fn* fn) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult status;
  if (DriverTable().cuGetProcAddress(name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) ==
          CUDA_SUCCESS &&
      status == CU_GET_PROC_ADDRESS_SUCCESS) {
    *fn = reinterpret_cast<Fn>(p);
  }
}

}  // namespace

bool LoadDriverApi(std::string* why) {
  static bool ok = false;
  static std::string* error = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string e;
    const kerncap::cuda::DriverLibrary* lib = kerncap::cuda::DriverLibrary::Open(&e);
    if (lib == nullptr) {
      error = new std::string("no CUDA driver: " + e);
      return;
    }
    DriverApi api;
    std::string missing;
    KC_CUDA_RESOLVE_TABLE(KC_AGENT_CUDA_DRIVER_FUNCTIONS, *lib, api, missing);
    if (!missing.empty()) {
      error = new std::string("the CUDA driver (CUDA " + std::to_string(lib->version() / 1000) +
                              "." + std::to_string(lib->version() % 1000 / 10) +
                              ") lacks functions the agent needs: " + missing);
      return;
    }
    api.version = lib->version();
    DriverTable() = api;
    ok = true;
  });
  if (!ok && why != nullptr && error != nullptr) *why = *error;
  return ok;
}

const DriverApi& Driver() {
  // The optional entries on first use, as before the table was loaded at
  // run time: after cuInit, never inside it (LoadDriverApi may run in the
  // driver's own cuInit, under CUDA_INJECTION64_PATH).
  static std::once_flag optional_once;
  std::call_once(optional_once, [] {
    if (DriverTable().cuGetProcAddress == nullptr) return;  // no driver: nothing calls through it
    ResolveOptional("cuFuncGetName", &DriverTable().FuncGetName);
    ResolveOptional("cuKernelGetName", &DriverTable().KernelGetName);
    ResolveOptional("cuFuncGetParamInfo", &DriverTable().FuncGetParamInfo);
    ResolveOptional("cuKernelGetParamInfo", &DriverTable().KernelGetParamInfo);
    ResolveOptional("cuFuncLoad", &DriverTable().FuncLoad);
    ResolveOptional("cuKernelGetFunction", &DriverTable().KernelGetFunction);
    ResolveOptional("cuKernelGetAttribute", &DriverTable().KernelGetAttribute);
    ResolveOptional("cuKernelGetLibrary", &DriverTable().KernelGetLibrary);
    ResolveOptional("cuLibraryGetGlobal", &DriverTable().LibraryGetGlobal);
    ResolveOptional("cuEventElapsedTime", &DriverTable().EventElapsedTime);
  });
  return DriverTable();
}

int DriverVersion() { return DriverTable().version; }

bool StreamBeingCaptured(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return Driver().cuStreamIsCapturing(stream, &status) != CUDA_SUCCESS ||
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}

std::string CuErrorString(CUresult r) {
  const char* name = nullptr;
  if (DriverTable().cuGetErrorName == nullptr || DriverTable().cuGetErrorName(r, &name) != CUDA_SUCCESS ||
      name == nullptr) {
    name = "CUDA_ERROR_?";
  }
  return std::string(name) + " (" + std::to_string(static_cast<int>(r)) + ")";
}

}  // namespace kerncap::agent::cuda
