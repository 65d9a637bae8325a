#include "common/cuda/driver_library.h"

#include <dlfcn.h>

#include <mutex>

namespace kerncap::cuda {

DriverLibrary::DriverLibrary(void* handle) : handle_(handle) {
  // CUresult cuDriverGetVersion(int*): CUresult is an int-sized enum, 0 = success.
  using GetVersionFn = int (*)(int*);
  auto get_version = reinterpret_cast<GetVersionFn>(::dlsym(handle_, "cuDriverGetVersion"));
  int v = 0;
  if (get_version != nullptr && get_version(&v) == 0 && v > 0) version_ = v;
}

const DriverLibrary* DriverLibrary::Open(std::string* error) {
  static const DriverLibrary* lib = nullptr;
  static std::string* open_error = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    // RTLD_GLOBAL: the same object the application's runtime loads (dlopen
    // of a loaded soname returns it), visible to CUPTI, which resolves the
    // driver by name.
    void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (h == nullptr) {
      const char* e = ::dlerror();
      open_error = new std::string(std::string("dlopen(libcuda.so.1) failed: ") +
                                   (e != nullptr ? e : "unknown error"));
      return;
    }
    lib = new DriverLibrary(h);  // leaked on purpose: used until the process ends
  });
  if (lib == nullptr && error != nullptr) *error = open_error != nullptr ? *open_error : "";
  return lib;
}

void* DriverLibrary::Symbol(const char* name) const { return ::dlsym(handle_, name); }

}  // namespace kerncap::cuda
