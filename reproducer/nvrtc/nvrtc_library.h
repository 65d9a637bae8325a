// nvrtc_library.h: libnvrtc, loaded at run time (dlopen), so kerncap-nvrtc
// builds and runs where the toolkit has no NVRTC (it then says so, and the
// reproducer's nvcc recipe stays). The functions are declared here from
// NVRTC's documented C API (nvrtc.h, CUDA 11+): nvrtcResult is an int-sized
// enum (0 = NVRTC_SUCCESS), nvrtcProgram an opaque pointer.
//
// Which libnvrtc: --nvrtc=PATH, else $KERNCAP_NVRTC, else the one of the
// toolkit whose nvcc is in use (--nvcc=PATH, else nvcc on $PATH, else
// /usr/local/cuda/bin/nvcc; symlinks resolved): <toolkit>/lib64,
// <toolkit>/targets/*/lib, <toolkit>/lib, each libnvrtc.so, else the newest
// libnvrtc.so.N. The same toolkit as nvcc's, so both build with one cicc
// and ptxas version; the toolkit's headers (cuda_fp16.h, cccl/) are the
// include/ folder beside the library's folder.
#ifndef KERNCAP_REPRODUCER_NVRTC_NVRTC_LIBRARY_H_
#define KERNCAP_REPRODUCER_NVRTC_NVRTC_LIBRARY_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kerncap::repro::nvrtc {

struct NvrtcApi {
  using Program = void*;
  const char* (*GetErrorString)(int) = nullptr;
  int (*Version)(int*, int*) = nullptr;
  int (*CreateProgram)(Program*, const char*, const char*, int, const char* const*,
                       const char* const*) = nullptr;
  int (*DestroyProgram)(Program*) = nullptr;
  int (*CompileProgram)(Program, int, const char* const*) = nullptr;
  int (*GetProgramLogSize)(Program, size_t*) = nullptr;
  int (*GetProgramLog)(Program, char*) = nullptr;
  int (*GetCUBINSize)(Program, size_t*) = nullptr;
  int (*GetCUBIN)(Program, char*) = nullptr;
  std::string path;         // the library loaded (symlinks resolved)
  std::string include_dir;  // the toolkit's headers beside it; empty when absent
  int major = 0, minor = 0;
};

// The files to try, best first (see above); `env` is $KERNCAP_NVRTC.
std::vector<std::string> NvrtcCandidates(const std::string& explicit_path, const char* env,
                                         const std::string& nvcc);

// The first candidate that loads and has every function; NotFound naming
// what was tried otherwise.
absl::StatusOr<NvrtcApi> LoadNvrtc(const std::vector<std::string>& candidates);

}  // namespace kerncap::repro::nvrtc

#endif  // KERNCAP_REPRODUCER_NVRTC_NVRTC_LIBRARY_H_
