#include "reproducer/nvrtc/nvrtc_library.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kerncap::repro::nvrtc {
namespace {

namespace fs = std::filesystem;

// nvcc as the Makefile names it: a path, or a name looked up on $PATH and
// then in the toolkit's usual place.
std::string ResolveNvcc(const std::string& nvcc) {
  const std::string name = nvcc.empty() ? "nvcc" : nvcc;
  std::vector<std::string> tries;
  if (name.find('/') != std::string::npos) {
    tries.push_back(name);
  } else {
    if (const char* path = std::getenv("PATH"); path != nullptr) {
      for (absl::string_view d : absl::StrSplit(path, ':', absl::SkipEmpty())) {
        tries.push_back(absl::StrCat(d, "/", name));
      }
    }
    tries.push_back("/usr/local/cuda/bin/" + name);
  }
  for (const std::string& t : tries) {
    if (::access(t.c_str(), X_OK) != 0) continue;
    std::error_code ec;
    fs::path real = fs::canonical(t, ec);
    return ec ? t : real.string();
  }
  return "";
}

// libnvrtc.so, else the libnvrtc.so.N with the largest N, in `dir`.
std::string LibraryIn(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / "libnvrtc.so", ec)) return (dir / "libnvrtc.so").string();
  std::string best;
  int best_major = -1;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (!absl::StartsWith(n, "libnvrtc.so.")) continue;
    // "libnvrtc.so.13" or "libnvrtc.so.13.0.88": the major version first.
    const std::string tail = n.substr(12);
    int major = 0;
    if (!absl::SimpleAtoi(tail.substr(0, tail.find('.')), &major)) continue;
    if (major > best_major) {
      best_major = major;
      best = e.path().string();
    }
  }
  return best;
}

template <typename T>
bool Resolve(void* h, const char* name, T* fn, std::vector<std::string>* missing) {
  *fn = reinterpret_cast<T>(::dlsym(h, name));
  if (*fn == nullptr) missing->push_back(name);
  return *fn != nullptr;
}

}  // namespace

std::vector<std::string> NvrtcCandidates(const std::string& explicit_path, const char* env,
                                         const std::string& nvcc) {
  if (!explicit_path.empty()) return {explicit_path};
  if (env != nullptr && *env != '\0') return {env};
  std::vector<std::string> out;
  const std::string real_nvcc = ResolveNvcc(nvcc);
  if (real_nvcc.empty()) return out;
  const fs::path root = fs::path(real_nvcc).parent_path().parent_path();
  std::vector<fs::path> dirs = {root / "lib64"};
  std::error_code ec;
  std::vector<fs::path> targets;
  for (const auto& e : fs::directory_iterator(root / "targets", ec)) {
    targets.push_back(e.path() / "lib");
  }
  std::sort(targets.begin(), targets.end());
  dirs.insert(dirs.end(), targets.begin(), targets.end());
  dirs.push_back(root / "lib");
  for (const fs::path& d : dirs) {
    const std::string lib = LibraryIn(d);
    if (!lib.empty() && std::find(out.begin(), out.end(), lib) == out.end()) out.push_back(lib);
  }
  return out;
}

absl::StatusOr<NvrtcApi> LoadNvrtc(const std::vector<std::string>& candidates) {
  if (candidates.empty()) {
    return absl::NotFoundError(
        "no libnvrtc: no nvcc to find its toolkit (--nvcc=PATH, --nvrtc=LIBNVRTC or "
        "$KERNCAP_NVRTC)");
  }
  std::vector<std::string> failures;
  for (const std::string& c : candidates) {
    // RTLD_LOCAL: nothing else in this process uses its symbols. Never
    // unloaded (the process is short-lived).
    void* h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = ::dlerror();
      failures.push_back(absl::StrCat(c, ": ", e != nullptr ? e : "dlopen failed"));
      continue;
    }
    NvrtcApi api;
    std::vector<std::string> missing;
    Resolve(h, "nvrtcGetErrorString", &api.GetErrorString, &missing);
    Resolve(h, "nvrtcVersion", &api.Version, &missing);
    Resolve(h, "nvrtcCreateProgram", &api.CreateProgram, &missing);
    Resolve(h, "nvrtcDestroyProgram", &api.DestroyProgram, &missing);
    Resolve(h, "nvrtcCompileProgram", &api.CompileProgram, &missing);
    Resolve(h, "nvrtcGetProgramLogSize", &api.GetProgramLogSize, &missing);
    Resolve(h, "nvrtcGetProgramLog", &api.GetProgramLog, &missing);
    Resolve(h, "nvrtcGetCUBINSize", &api.GetCUBINSize, &missing);
    Resolve(h, "nvrtcGetCUBIN", &api.GetCUBIN, &missing);
    if (!missing.empty()) {
      failures.push_back(absl::StrCat(c, " lacks ", absl::StrJoin(missing, ", ")));
      continue;
    }
    api.Version(&api.major, &api.minor);
    std::error_code ec;
    const fs::path real = fs::canonical(c, ec);
    api.path = ec ? c : real.string();
    const fs::path include = fs::path(api.path).parent_path().parent_path() / "include";
    if (fs::exists(include / "cuda_fp16.h", ec)) api.include_dir = include.string();
    return api;
  }
  return absl::NotFoundError(absl::StrCat("no usable libnvrtc: ", absl::StrJoin(failures, "; ")));
}

}  // namespace kerncap::repro::nvrtc
