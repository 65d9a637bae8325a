#include "reproducer/generator/path_util.h"

#include <sys/stat.h>

#include <filesystem>

#include "absl/strings/match.h"

namespace kerncap::repro {

namespace fs = std::filesystem;

std::string Normalize(const std::string& path, const std::string& base) {
  if (path.empty()) return "";
  fs::path p(path);
  if (p.is_relative() && !base.empty()) p = fs::path(base) / p;
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

bool IsUnder(const std::string& path, const std::string& root) {
  if (root.empty() || path.empty()) return false;
  if (root == "/") return path[0] == '/';
  return path == root || (absl::StartsWith(path, root) && path[root.size()] == '/');
}

std::string RelativeTo(const std::string& path, const std::string& root) {
  if (!IsUnder(path, root)) return "";
  if (path == root) return ".";
  return root == "/" ? path.substr(1) : path.substr(root.size() + 1);
}

std::string CommonAncestor(const std::vector<std::string>& paths) {
  if (paths.empty()) return "/";
  std::string common = paths[0];
  for (const std::string& p : paths) {
    while (!IsUnder(p, common)) {
      size_t slash = common.rfind('/');
      if (slash == std::string::npos || slash == 0) return "/";
      common.resize(slash);
    }
  }
  return common;
}

bool IsSystemPath(const std::string& path) {
  static const char* const kPrefixes[] = {"/usr/include",       "/usr/lib",   "/usr/lib64",
                                          "/usr/local/include", "/usr/share", "/opt/rocm",
                                          "/opt/cuda",          "/lib",       "/lib64"};
  for (const char* p : kPrefixes) {
    if (IsUnder(path, p)) return true;
  }
  // /usr/local/cuda, /usr/local/cuda-13.0, /opt/rocm-6.2 ...
  return absl::StartsWith(path, "/usr/local/cuda") || absl::StartsWith(path, "/opt/rocm");
}

std::string SystemIncludeRelative(const std::string& path) {
  const std::string markers[] = {"/usr/include/", "/usr/local/include/"};
  for (const std::string& m : markers) {
    if (absl::StartsWith(path, m)) return path.substr(m.size());
  }
  if (IsSystemPath(path)) {
    size_t pos = path.find("/include/");
    if (pos != std::string::npos) return path.substr(pos + 9);
  }
  return "";
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool DirExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace kerncap::repro
