// driver_library.h: the CUDA driver (libcuda.so.1) loaded at run time, for
// every kerncap part that calls it: the agent (agent/cuda/driver_table.h) and
// the replay. Nothing links libcuda, so a binary or the agent library starts
// on a host without a GPU driver (LD_PRELOAD of the agent into any process
// there must change nothing) and says so instead of failing to load.
//
// Each user declares its own table of entry points with an X-macro list and
// fills it with KC_CUDA_RESOLVE_TABLE; the symbol looked up for an entry is
// the name cuda.h's macros map it to (cuMemAlloc -> cuMemAlloc_v2), so every
// pointer has exactly the ABI of the declaration it is compiled against.
// (cuGetProcAddress with CUDA_VERSION does not: for 13000 it returns
// cuCtxSynchronize_v2(CUcontext) although cuda.h declares
// cuCtxSynchronize(void); measured on the H200.)
//
// Std-only and free of cuda.h: the library is opened and versioned here; only
// the tables (in their users' folders) need the toolkit's headers.
#ifndef KERNCAP_COMMON_CUDA_DRIVER_LIBRARY_H_
#define KERNCAP_COMMON_CUDA_DRIVER_LIBRARY_H_

#include <string>

namespace kerncap::cuda {

class DriverLibrary {
 public:
  // dlopen("libcuda.so.1") once per process (later calls return the same
  // result). nullptr when there is no driver; *error then says why (the
  // dlerror text). The handle is never closed.
  static const DriverLibrary* Open(std::string* error);

  // dlsym in the driver; nullptr when it does not export `name`.
  void* Symbol(const char* name) const;
  // cuDriverGetVersion: the CUDA version the driver supports, e.g. 13000 for
  // 13.0, 12080 for 12.8 (0 when unknown). Needs no cuInit.
  int version() const { return version_; }
  int major_version() const { return version_ / 1000; }

 private:
  explicit DriverLibrary(void* handle);
  void* handle_;
  int version_ = 0;
};

}  // namespace kerncap::cuda

// The exported symbol of a cuda.h function name, after cuda.h's macros
// (KC_CUDA_SYMBOL(cuMemAlloc) is "cuMemAlloc_v2"). Needs cuda.h included.
#define KC_CUDA_SYMBOL_INNER_(x) #x
#define KC_CUDA_SYMBOL(x) KC_CUDA_SYMBOL_INNER_(x)

// Fills `table` (a struct with one member per X(name), declared as
// `decltype(&::name) name`) from `lib`; appends the symbols the driver does
// not export to the std::string `missing`, comma-separated.
#define KC_CUDA_RESOLVE_ENTRY_(name)                                                       \
  if ((kc_table_.name = reinterpret_cast<decltype(kc_table_.name)>(                        \
           kc_lib_.Symbol(KC_CUDA_SYMBOL(name)))) == nullptr) {                            \
    kc_missing_ += kc_missing_.empty() ? "" : ", ";                                        \
    kc_missing_ += KC_CUDA_SYMBOL(name);                                                   \
  }
#define KC_CUDA_RESOLVE_TABLE(LIST, lib, table, missing) \
  do {                                                   \
    const auto& kc_lib_ = (lib);                         \
    auto& kc_table_ = (table);                           \
    std::string& kc_missing_ = (missing);                \
    LIST(KC_CUDA_RESOLVE_ENTRY_)                         \
  } while (0)

#endif  // KERNCAP_COMMON_CUDA_DRIVER_LIBRARY_H_
