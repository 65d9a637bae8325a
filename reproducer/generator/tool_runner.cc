#include "reproducer/generator/tool_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errno_status.h"
#include "common/fs_identity.h"

namespace kerncap::repro {

std::string FindTool(const std::string& name, const std::vector<std::string>& extra_dirs) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) {
    return ::access(name.c_str(), X_OK) == 0 ? name : "";
  }
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    for (absl::string_view d : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      dirs.emplace_back(d);
    }
  }
  dirs.insert(dirs.end(), extra_dirs.begin(), extra_dirs.end());
  for (const std::string& d : dirs) {
    std::string candidate = absl::StrCat(d, "/", name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

namespace {

// kerncap's own tools: beside the running kerncap binary (bin/, or bin/ next
// to tests/), else on PATH.
std::string KerncapTool(const std::string& name) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const std::filesystem::path& d :
         {self.parent_path(), self.parent_path().parent_path() / "bin"}) {
      const std::string c = (d / name).string();
      if (::access(c.c_str(), X_OK) == 0) return c;
    }
  }
  return FindTool(name);
}

}  // namespace

ToolPaths ResolveTools(const ToolPaths& in) {
  // The CUDA toolkit is often installed without being put on PATH.
  const std::vector<std::string> cuda = {"/usr/local/cuda/bin"};
  const std::vector<std::string> llvm = {"/usr/lib/llvm-15/bin"};
  ToolPaths t = in;
  if (t.nvcc.empty()) t.nvcc = FindTool("nvcc", cuda);
  if (t.nvdisasm.empty()) t.nvdisasm = FindTool("nvdisasm", cuda);
  if (t.cuobjdump.empty()) t.cuobjdump = FindTool("cuobjdump", cuda);
  if (t.clang.empty()) {
    t.clang = FindTool("clang-15");
    if (t.clang.empty()) t.clang = FindTool("clang", llvm);
  }
  if (t.python3.empty()) t.python3 = FindTool("python3");
  if (t.slicer.empty()) t.slicer = KerncapTool("kerncap-cuda-slice");
  if (t.nvrtc.empty()) t.nvrtc = KerncapTool("kerncap-nvrtc");
  if (t.llvm_objdump.empty()) {
    t.llvm_objdump = FindTool("llvm-objdump-15");
    if (t.llvm_objdump.empty()) t.llvm_objdump = FindTool("llvm-objdump", llvm);
  }
  return t;
}

absl::StatusOr<ToolResult> RunTool(const std::vector<std::string>& argv, const std::string& cwd,
                                   int timeout_s) {
  if (argv.empty()) return absl::InvalidArgumentError("RunTool: empty argv");
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return ErrnoError(errno, "pipe");
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    int e = errno;
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return ErrnoError(e, "pipe");
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    return ErrnoError(e, "fork");
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    // A tool run for a kerncapd caller (a compiler reading that user's
    // sources) runs as that user, never as the daemon (fs_identity.h).
    if (!AdoptFsIdentityForExec()) ::_exit(126);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ToolResult r;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  char buf[65536];
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      r.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    int n = ::poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      ssize_t got = ::read(fds[i].fd, buf, sizeof(buf));
      if (got > 0) {
        sinks[i]->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (pollfd& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = (!r.timed_out && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  if (r.exit_code == 127) {
    r.err += absl::StrCat("\ncould not execute ", argv[0]);
  }
  return r;
}

ScratchDir::ScratchDir(const std::string& prefix) {
  std::string t = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
  if (::mkdtemp(t.data()) != nullptr) path_ = t;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

}  // namespace kerncap::repro
