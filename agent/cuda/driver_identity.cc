#include "agent/cuda/driver_identity.h"

#include <dlfcn.h>

#include <cctype>
#include <fstream>
#include <sstream>

namespace kerncap::agent::cuda {
namespace {

// digits '.' digits ('.' digits)*
bool LooksLikeVersion(std::string_view t) {
  int dots = 0;
  bool digit_before = false;
  for (char ch : t) {
    if (std::isdigit(static_cast<unsigned char>(ch))) {
      digit_before = true;
    } else if (ch == '.' && digit_before) {
      ++dots;
      digit_before = false;
    } else {
      return false;
    }
  }
  return dots >= 1 && digit_before;
}

std::string FromNvml() {
  void* h = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return "";
  using InitFn = int (*)();
  using VersionFn = int (*)(char*, unsigned);
  auto init = reinterpret_cast<InitFn>(::dlsym(h, "nvmlInit_v2"));
  auto version = reinterpret_cast<VersionFn>(::dlsym(h, "nvmlSystemGetDriverVersion"));
  auto shutdown = reinterpret_cast<InitFn>(::dlsym(h, "nvmlShutdown"));
  std::string out;
  if (init != nullptr && version != nullptr && init() == 0) {
    char buf[96] = {0};
    if (version(buf, sizeof(buf)) == 0) out = buf;
    if (shutdown != nullptr) shutdown();
  }
  // The library stays loaded: unloading NVML from inside an application is
  // not worth the risk for a version string.
  return LooksLikeVersion(out) ? out : "";
}

}  // namespace

std::string ParseNvidiaProcVersion(std::string_view text) {
  size_t start = text.find("NVRM version:");
  if (start == std::string_view::npos) return "";
  std::string_view line = text.substr(start);
  line = line.substr(0, line.find('\n'));
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    size_t j = i;
    while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
    std::string_view token = line.substr(i, j - i);
    if (LooksLikeVersion(token)) return std::string(token);
    i = j;
  }
  return "";
}

std::string CudaVersionString(int version) {
  if (version <= 0) return "";
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

const std::string& NvidiaKernelDriverVersion() {
  static const std::string* version = [] {
    std::ifstream f("/proc/driver/nvidia/version");
    std::stringstream ss;
    ss << f.rdbuf();
    std::string v = ParseNvidiaProcVersion(ss.str());
    if (v.empty()) v = FromNvml();
    return new std::string(v);  // never destroyed: used from atexit paths
  }();
  return *version;
}

}  // namespace kerncap::agent::cuda
