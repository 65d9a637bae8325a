#include "agent/cuda/cupti_api.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <set>

#include "common/cuda/driver_library.h"

namespace kerncap::agent::cuda {
namespace {

constexpr int kOldestCuptiMajor = 12;

#if defined(__aarch64__)
constexpr const char* kTargetLib = "targets/sbsa-linux/lib";
#else
constexpr const char* kTargetLib = "targets/x86_64-linux/lib";
#endif

// Built on first use and leaked: the library constructor (injection.cc) fills
// it before this file's dynamic initializers are guaranteed to have run, and a
// namespace-scope table with a non-trivial member would be initialized again
// (emptied) after it: every call through it would then jump to null.
CuptiApi& CuptiTable() {
  static CuptiApi* table = new CuptiApi();
  return *table;
}

std::string Basename(const std::string& p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

std::string Dirname(const std::string& p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? std::string() : p.substr(0, s);
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool HasGlob(const std::string& p) { return p.find_first_of("*?[") != std::string::npos; }

std::vector<std::string> SplitPath(const char* v) {
  std::vector<std::string> out;
  if (v == nullptr) return out;
  std::string s(v);
  size_t start = 0;
  while (start <= s.size()) {
    size_t colon = s.find(':', start);
    if (colon == std::string::npos) colon = s.size();
    if (colon > start) out.push_back(s.substr(start, colon - start));
    start = colon + 1;
  }
  return out;
}

void AddEnv(std::vector<std::string>* out, const char* name) {
  const char* v = std::getenv(name);
  if (v != nullptr && *v != '\0') out->push_back(v);
}

int CollectLoaded(struct dl_phdr_info* info, size_t, void* data) {
  if (info->dlpi_name != nullptr && info->dlpi_name[0] == '/') {
    static_cast<std::vector<std::string>*>(data)->push_back(info->dlpi_name);
  }
  return 0;
}

}  // namespace

int CuptiMajorOf(const std::string& path) {
  const std::string base = Basename(path);
  const std::string prefix = "libcupti.so.";
  if (base.rfind(prefix, 0) != 0) return 0;
  int major = 0;
  size_t i = prefix.size();
  while (i < base.size() && base[i] >= '0' && base[i] <= '9' && major < 10000) {
    major = major * 10 + (base[i] - '0');
    ++i;
  }
  return major;
}

std::vector<CuptiCandidate> CuptiCandidates(const CuptiSearch& search) {
  std::vector<CuptiCandidate> out;
  std::set<std::string> seen;
  auto add = [&](const std::string& path, int major) {
    if (seen.insert(path).second) out.push_back(CuptiCandidate{path, major});
  };
  if (!search.override_path.empty()) {
    const std::string& o = search.override_path;
    if (Basename(o).rfind("libcupti", 0) == 0) {
      add(o, CuptiMajorOf(o));
    } else {
      for (int m = search.driver_major; m >= kOldestCuptiMajor; --m) {
        add(o + "/libcupti.so." + std::to_string(m), m);
      }
    }
    return out;
  }
  for (const std::string& l : search.loaded_libraries) {
    if (Basename(l).rfind("libcupti.so", 0) == 0) {
      add(l, CuptiMajorOf(l));
      return out;  // a process cannot use two CUPTIs
    }
  }
  for (int m = search.driver_major; m >= kOldestCuptiMajor; --m) {
    const std::string so = "libcupti.so." + std::to_string(m);
    const std::string cu = "cu" + std::to_string(m);
    // Beside the CUDA libraries already loaded.
    for (const std::string& l : search.loaded_libraries) {
      const std::string base = Basename(l);
      if (base.rfind("libcu", 0) != 0 && base.rfind("libnv", 0) != 0) continue;
      const std::string dir = Dirname(l);
      const std::string pkg_root = Dirname(Dirname(dir));  // .../nvidia/<package>/lib
      if (EndsWith(dir, "/lib") && EndsWith(pkg_root, "/nvidia")) {
        add(pkg_root + "/cuda_cupti/lib/" + so, m);
        add(pkg_root + "/" + cu + "/lib/" + so, m);
      } else {
        add(dir + "/" + so, m);
        add(Dirname(dir) + "/extras/CUPTI/lib64/" + so, m);
      }
    }
    // The pip wheels of the active Python environments.
    for (const std::string& p : search.python_prefixes) {
      add(p + "/lib/python3*/site-packages/nvidia/cuda_cupti/lib/" + so, m);
      add(p + "/lib/python3*/site-packages/nvidia/" + cu + "/lib/" + so, m);
    }
    for (const std::string& p : search.python_paths) {
      add(p + "/nvidia/cuda_cupti/lib/" + so, m);
      add(p + "/nvidia/" + cu + "/lib/" + so, m);
    }
    // The dynamic linker's own search.
    add(so, m);
    // Toolkits.
    std::vector<std::string> roots = search.toolkit_roots;
    roots.push_back("/usr/local/cuda-" + std::to_string(m) + "*");
    roots.push_back("/usr/local/cuda");
    for (const std::string& r : roots) {
      add(r + "/extras/CUPTI/lib64/" + so, m);
      add(r + "/lib64/" + so, m);
      add(r + "/" + kTargetLib + "/" + so, m);
    }
  }
  return out;
}

CuptiSearch CuptiSearchFromProcess(int driver_major) {
  CuptiSearch s;
  s.driver_major = driver_major;
  if (const char* o = std::getenv("KERNCAP_AGENT_CUPTI"); o != nullptr) s.override_path = o;
  dl_iterate_phdr(&CollectLoaded, &s.loaded_libraries);
  AddEnv(&s.python_prefixes, "VIRTUAL_ENV");
  AddEnv(&s.python_prefixes, "CONDA_PREFIX");
  s.python_paths = SplitPath(std::getenv("PYTHONPATH"));
  AddEnv(&s.toolkit_roots, "CUDA_HOME");
  AddEnv(&s.toolkit_roots, "CUDA_PATH");
  return s;
}

namespace {

// Loads `path` (a file or a bare soname) as CUPTI of `major`; false with
// *why when it does not load or lacks an entry point.
bool TryLoad(const std::string& path, int major, std::string* why) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = ::dlerror();
    *why = e != nullptr ? e : "dlopen failed";
    return false;
  }
  struct Lib {
    void* h;
    void* Symbol(const char* name) const { return ::dlsym(h, name); }
  } lib{h};
  CuptiApi api;
  std::string missing;
  KC_CUDA_RESOLVE_TABLE(KC_AGENT_CUPTI_FUNCTIONS, lib, api, missing);
  if (!missing.empty()) {
    *why = path + " lacks " + missing;
    return false;  // left loaded: unloading a library that ran constructors is not safe
  }
  api.cuptiSubscribe_v2 =
      reinterpret_cast<decltype(api.cuptiSubscribe_v2)>(::dlsym(h, "cuptiSubscribe_v2"));
  char real[4096];
  api.path = path;
  if (path.find('/') == std::string::npos) {
    // Where the linker found it.
    Dl_info info;
    if (api.cuptiGetVersion != nullptr &&
        ::dladdr(reinterpret_cast<void*>(api.cuptiGetVersion), &info) != 0 &&
        info.dli_fname != nullptr) {
      api.path = info.dli_fname;
    }
  } else if (::realpath(path.c_str(), real) != nullptr) {
    api.path = real;
  }
  api.major = major != 0 ? major : CuptiMajorOf(api.path);
  CuptiTable() = api;
  return true;
}

std::string FindAndLoad(int driver_major) {
  if (driver_major < kOldestCuptiMajor) {
    return "the CUDA driver supports CUDA " + std::to_string(driver_major) +
           "; the agent needs a CUDA 12 or newer driver";
  }
  const CuptiSearch search = CuptiSearchFromProcess(driver_major);
  const std::vector<CuptiCandidate> candidates = CuptiCandidates(search);
  std::string failures;  // files that exist but did not load
  for (const CuptiCandidate& c : candidates) {
    if (c.major > driver_major) {
      return c.path + " is CUPTI " + std::to_string(c.major) + ", newer than the driver (CUDA " +
             std::to_string(driver_major) + "); it cannot run on it";
    }
    std::vector<std::string> files;
    if (c.path.find('/') == std::string::npos) {
      files.push_back(c.path);
    } else if (HasGlob(c.path)) {
      glob_t g{};
      if (::glob(c.path.c_str(), 0, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) files.push_back(g.gl_pathv[i]);
      }
      ::globfree(&g);
    } else if (::access(c.path.c_str(), F_OK) == 0) {
      files.push_back(c.path);
    } else if (!search.override_path.empty()) {
      failures += (failures.empty() ? "" : "; ") + c.path + ": no such file";
    }
    for (const std::string& f : files) {
      std::string why;
      if (TryLoad(f, c.major, &why)) return "";
      // A bare soname the linker does not find is just not there.
      if (f.find('/') != std::string::npos) failures += (failures.empty() ? "" : "; ") + why;
    }
  }
  std::string msg = "no CUPTI for the CUDA " + std::to_string(driver_major) + " driver (libcupti.so." +
                    std::to_string(driver_major) +
                    (driver_major > kOldestCuptiMajor ? " or older, down to 12" : "") + ")";
  if (!search.override_path.empty()) {
    msg += " at KERNCAP_AGENT_CUPTI=" + search.override_path;
  } else {
    msg += " beside the loaded CUDA libraries, in the Python environment's nvidia/cuda_cupti/lib, "
           "on the linker's path or in the toolkits (/usr/local/cuda*); set KERNCAP_AGENT_CUPTI to "
           "a libcupti.so." + std::to_string(driver_major) + " file or its folder";
  }
  if (!failures.empty()) msg += " (" + failures + ")";
  return msg;
}

}  // namespace

bool LoadCuptiApi(int driver_major, std::string* why) {
  static std::string* error = nullptr;
  static std::once_flag once;
  std::call_once(once, [driver_major] {
    std::string e = FindAndLoad(driver_major);
    if (!e.empty()) error = new std::string(std::move(e));
  });
  if (error != nullptr && why != nullptr) *why = *error;
  return error == nullptr;
}

const CuptiApi& Cupti() { return CuptiTable(); }

}  // namespace kerncap::agent::cuda
