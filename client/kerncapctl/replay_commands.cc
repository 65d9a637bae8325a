#include "client/kerncapctl/replay_commands.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "client/kerncapctl/commands.h"
#include "common/exit_codes.h"

extern char** environ;

namespace kerncap::ctl {
namespace {

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<char*> CArgv(std::vector<std::string>& argv) {
  std::vector<char*> out;
  out.reserve(argv.size() + 1);
  for (std::string& a : argv) out.push_back(a.data());
  out.push_back(nullptr);
  return out;
}

// Exports `capture` from the daemon behind `connection` to a new temporary
// .kcap; returns its path.
absl::StatusOr<std::string> ExportToTemp(const ConnectionOptions& connection,
                                         const std::string& capture) {
  auto conn = Connection::Open(connection);
  if (!conn.ok()) return conn.status();
  std::string dir = std::filesystem::temp_directory_path().string();
  std::string path = absl::StrCat(dir, "/kerncapctl-replay-", ::getpid(), ".kcap");
  std::ostringstream discard;  // export's summary line would mix with the replayer's output
  absl::Status s = CmdExport(**conn, Output{discard}, capture, path);
  if (!s.ok()) {
    std::filesystem::remove(path);
    return s;
  }
  return path;
}

}  // namespace

std::vector<std::string> ReplayArgs(const ReplayRequest& request,
                                    const std::string& daemon_endpoint) {
  std::vector<std::string> args = {request.mode};
  if (!daemon_endpoint.empty()) args.push_back(absl::StrCat("--daemon=", daemon_endpoint));
  args.push_back(request.capture);
  args.insert(args.end(), request.flags.begin(), request.flags.end());
  return args;
}

absl::StatusOr<int> RunReplayCommand(const ReplayRequest& request,
                                     const ConnectionOptions& connection) {
  auto binary = FindReplayBinary(ReplayLookupFromProcess());
  if (!binary.ok()) return binary.status();

  std::string endpoint;
  std::string temp_kcap;
  ReplayRequest req = request;
  if (IsRegularFile(request.capture)) {
    // A .kcap file: no daemon involved.
  } else if (connection.host.empty()) {
    endpoint = absl::StrCat("unix:", connection.socket);
  } else {
    auto exported = ExportToTemp(connection, request.capture);
    if (!exported.ok()) return exported.status();
    temp_kcap = *exported;
    req.capture = temp_kcap;
  }

  std::vector<std::string> argv = ReplayArgs(req, endpoint);
  argv.insert(argv.begin(), *binary);
  std::vector<char*> cargv = CArgv(argv);
  std::cout.flush();
  std::cerr.flush();
  if (temp_kcap.empty()) {
    ::execv(cargv[0], cargv.data());
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", *binary, ": ", std::strerror(errno)));
  }
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, cargv[0], nullptr, nullptr, cargv.data(), environ);
  if (rc != 0) {
    std::filesystem::remove(temp_kcap);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", *binary, ": ", std::strerror(rc)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::filesystem::remove(temp_kcap);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return exit_code::kError;
}

}  // namespace kerncap::ctl
