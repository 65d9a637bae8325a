#include "reproducer/replay/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kerncap::replay {
namespace {

// Stringizes after macro expansion: cuda.h maps e.g. cuMemcpyHtoD to
// cuMemcpyHtoD_v2, and the exported symbol of that name has exactly the ABI
// of the declaration we compile against. (cuGetProcAddress with CUDA_VERSION
// does not: for 13000 it returns cuCtxSynchronize_v2(CUcontext) although
// cuda.h declares cuCtxSynchronize(void); measured on the H200.)
#define KC_STR_INNER(x) #x
#define KC_STR(x) KC_STR_INNER(x)

absl::StatusOr<const CudaDriver*> Load() {
  void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (h == nullptr) {
    const char* e = ::dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA driver: dlopen(libcuda.so.1) failed: ", e ? e : "unknown error"));
  }
  auto* d = new CudaDriver();
  std::string missing;
  auto resolve = [&](void** slot, const char* name) {
    *slot = ::dlsym(h, name);
    if (*slot == nullptr) absl::StrAppend(&missing, missing.empty() ? "" : ", ", name);
  };
#define KC_CUDA_RESOLVE(name) resolve(reinterpret_cast<void**>(&d->name), KC_STR(name));
  KC_CUDA_DRIVER_FUNCTIONS(KC_CUDA_RESOLVE)
#undef KC_CUDA_RESOLVE
  if (!missing.empty()) {
    delete d;
    return absl::FailedPreconditionError(
        absl::StrCat("the CUDA driver lacks functions kerncap-replay needs: ", missing));
  }
  return d;
}

}  // namespace

absl::StatusOr<const CudaDriver*> CudaDriver::Get() {
  static absl::StatusOr<const CudaDriver*>* loaded = nullptr;
  static std::once_flag once;
  std::call_once(once, [] { loaded = new absl::StatusOr<const CudaDriver*>(Load()); });
  return *loaded;
}

std::string CudaDriver::ErrorText(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName) cuGetErrorName(r, &name);
  if (cuGetErrorString) cuGetErrorString(r, &text);
  return absl::StrCat(name ? name : absl::StrCat("CUresult ", static_cast<int>(r)), " (",
                      text ? text : "?", ")");
}

absl::Status CudaDriver::Check(CUresult r, const std::string& what) const {
  if (r == CUDA_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", ErrorText(r)));
}

bool IsNoCudaDeviceError(const absl::Status& s) {
  const absl::string_view m = s.message();
  return absl::StrContains(m, "no CUDA driver") || absl::StrContains(m, "no CUDA device") ||
         absl::StrContains(m, "CUDA_ERROR_NO_DEVICE");
}

}  // namespace kerncap::replay
