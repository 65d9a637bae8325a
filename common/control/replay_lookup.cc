#include "common/control/replay_lookup.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kerncap {
namespace {

constexpr char kReplayName[] = "kerncap-replay";

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

ReplayLookup ReplayLookupFromProcess() {
  ReplayLookup l;
  if (const char* e = std::getenv("KERNCAP_REPLAY"); e != nullptr) l.env_override = e;
  if (const char* p = std::getenv("PATH"); p != nullptr) l.path_env = p;
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) l.self_exe.assign(buf, static_cast<size_t>(n));
  return l;
}

absl::StatusOr<std::string> FindReplayBinary(const ReplayLookup& lookup) {
  if (!lookup.env_override.empty()) {
    if (IsExecutableFile(lookup.env_override)) return lookup.env_override;
    return absl::FailedPreconditionError(
        absl::StrCat("KERNCAP_REPLAY=", lookup.env_override,
                     " is not an executable file; point it at kerncap-replay or unset it"));
  }
  std::vector<std::string> looked;
  if (!lookup.self_exe.empty()) {
    std::string dir = std::filesystem::path(lookup.self_exe).parent_path().string();
    std::string candidate = absl::StrCat(dir, "/", kReplayName);
    if (IsExecutableFile(candidate)) return candidate;
    looked.push_back(absl::StrCat("next to ", std::filesystem::path(lookup.self_exe).filename().string(), " (", candidate, ")"));
  }
  for (absl::string_view dir : absl::StrSplit(lookup.path_env, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", kReplayName);
    if (IsExecutableFile(candidate)) return candidate;
  }
  looked.push_back(lookup.path_env.empty() ? "on PATH (empty)"
                                           : absl::StrCat("on PATH (", lookup.path_env, ")"));
  return absl::NotFoundError(absl::StrCat(
      "kerncap-replay not found: looked ", absl::StrJoin(looked, " and "),
      ". It is the GPU replayer, built with the CUDA toolkit (target kerncap-replay): install "
      "it next to this program, put it on PATH, or set KERNCAP_REPLAY=/path/to/kerncap-replay"));
}

}  // namespace kerncap
