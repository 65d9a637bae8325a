#include "tests/integration/subprocess.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace kerncap::testing {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

pid_t Spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            const std::string& out_path, const std::string& err_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  // Environment: ours, with overrides from `env`.
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) merged[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : env) merged[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : merged) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argvp;
  for (auto& s : args) argvp.push_back(s.data());
  argvp.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argvp[0], &actions, nullptr, argvp.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

void Decode(int status, RunResult* r) {
  if (WIFEXITED(status)) r->exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r->signal = WTERMSIG(status);
}

}  // namespace

std::string BinaryPath(const std::string& name) {
  const char* dir = std::getenv("KERNCAP_BUILD_DIR");
  return std::string(dir != nullptr ? dir : "build") + "/bin/" + name;
}

std::string MakeTempDir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "_XXXXXX";
  char* made = mkdtemp(tmpl.data());
  return made != nullptr ? std::string(made) : std::string();
}

void RemoveTree(const std::string& path) {
  if (path.empty() || path == "/") return;
  nftw(
      path.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16,
      FTW_DEPTH | FTW_PHYS);
}

RunResult RunProcess(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
              const std::map<std::string, std::string>& extra_env) {
  Background proc(argv, extra_env);
  RunResult result;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (proc.Running()) {
    if (std::chrono::steady_clock::now() > deadline) {
      result = proc.Stop(SIGKILL);
      result.timed_out = true;
      result.exit_code = -1;
      return result;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return proc.Stop(0);
}

Background::Background(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& extra_env) {
  std::string dir = MakeTempDir("kc_proc");
  out_path_ = dir + "/stdout";
  err_path_ = dir + "/stderr";
  pid_ = Spawn(argv, extra_env, out_path_, err_path_);
}

Background::~Background() {
  if (pid_ > 0 && !reaped_) Stop(SIGKILL);
  RemoveTree(DirName(out_path_));
}

std::string Background::DirName(const std::string& path) {
  return path.substr(0, path.find_last_of('/'));
}

bool Background::Running() {
  if (pid_ <= 0 || reaped_) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    last_status_ = status;
    return false;
  }
  return true;
}

RunResult Background::Stop(int sig, std::chrono::milliseconds timeout) {
  RunResult result;
  if (pid_ <= 0) {
    result.err = "spawn failed";
    return result;
  }
  if (!reaped_) {
    if (sig != 0) kill(pid_, sig);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (Running()) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        result.timed_out = true;
        int status = 0;
        waitpid(pid_, &status, 0);
        reaped_ = true;
        last_status_ = status;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  Decode(last_status_, &result);
  result.out = Stdout();
  result.err = Stderr();
  return result;
}

std::string Background::Stdout() const { return Slurp(out_path_); }
std::string Background::Stderr() const { return Slurp(err_path_); }

bool WaitFor(const std::function<bool()>& predicate, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return predicate();
}

}  // namespace kerncap::testing
