// path_util.h: lexical path helpers shared by the generator's components
// (no file system access unless the name says so).
#ifndef KERNCAP_REPRODUCER_GENERATOR_PATH_UTIL_H_
#define KERNCAP_REPRODUCER_GENERATOR_PATH_UTIL_H_

#include <string>
#include <vector>

namespace kerncap::repro {

// `path` made absolute against `base` (when relative) and normalised
// ("a/./b/../c" -> "a/c"), without a trailing slash.
std::string Normalize(const std::string& path, const std::string& base = "");

// True when `path` is `root` or inside it (both normalised absolute paths).
bool IsUnder(const std::string& path, const std::string& root);

// `path` relative to `root` ("" when not under it; "." for root itself).
std::string RelativeTo(const std::string& path, const std::string& root);

// The deepest directory containing every path ("/" at worst).
std::string CommonAncestor(const std::vector<std::string>& paths);

// Toolkit and system locations whose files are never copied into a project
// (the compiler on the target machine brings its own): /usr/include,
// /usr/lib, /usr/local/cuda*, /usr/local/include, /opt/rocm*, /opt/cuda,
// /usr/share, /lib.
bool IsSystemPath(const std::string& path);

// For a path under a system include directory (/usr/include,
// /usr/local/include, a CUDA or ROCm include folder): the part after it
// ("hip/hip_runtime.h"); empty otherwise.
std::string SystemIncludeRelative(const std::string& path);

bool FileExists(const std::string& path);  // a regular file
bool DirExists(const std::string& path);

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_PATH_UTIL_H_
