#include "reproducer/replay/cuda/cuda_driver.h"

#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cuda/driver_library.h"

namespace kerncap::replay {
namespace {

absl::StatusOr<const CudaDriver*> Load() {
  std::string error;
  const cuda::DriverLibrary* lib = cuda::DriverLibrary::Open(&error);
  if (lib == nullptr) return absl::FailedPreconditionError(absl::StrCat("no CUDA driver: ", error));
  auto* d = new CudaDriver();
  std::string missing;
  KC_CUDA_RESOLVE_TABLE(KC_CUDA_DRIVER_FUNCTIONS, *lib, *d, missing);
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
