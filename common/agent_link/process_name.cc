#include "common/agent_link/process_name.h"

#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>

namespace kerncap::link {
namespace {

// The kernel's task names hold 15 bytes and a NUL (TASK_COMM_LEN).
constexpr size_t kCommBytes = 15;

std::string FileName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string CompleteProcessName(std::string comm, const std::vector<std::string>& paths) {
  while (!comm.empty() && (comm.back() == '\n' || comm.back() == '\0')) comm.pop_back();
  if (comm.size() != kCommBytes) return comm;
  for (const std::string& p : paths) {
    const std::string name = FileName(p);
    if (name.size() > comm.size() && name.compare(0, comm.size(), comm) == 0) return name;
  }
  return comm;
}

namespace {

std::string ProcessNameIn(const std::string& proc) {
  std::ifstream comm_file(proc + "/comm");
  std::string comm;
  if (!std::getline(comm_file, comm)) return "";
  std::vector<std::string> paths;
  char exe[4096];
  const ssize_t n = ::readlink((proc + "/exe").c_str(), exe, sizeof(exe) - 1);
  if (n > 0) paths.emplace_back(exe, static_cast<size_t>(n));
  std::ifstream cmdline(proc + "/cmdline", std::ios::binary);
  std::string argv0;
  std::getline(cmdline, argv0, '\0');
  if (!argv0.empty()) paths.push_back(argv0);
  return CompleteProcessName(std::move(comm), paths);
}

}  // namespace

std::string ProcessName() { return ProcessNameIn("/proc/self"); }

std::string ProcessNameOf(int pid) { return ProcessNameIn("/proc/" + std::to_string(pid)); }

std::vector<std::string> CommandLineOf(int pid, size_t max_args, size_t max_arg_bytes) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::vector<std::string> out;
  std::string arg;
  while (out.size() < max_args && std::getline(in, arg, '\0')) {
    if (arg.size() > max_arg_bytes) arg.resize(max_arg_bytes);
    out.push_back(std::move(arg));
  }
  return out;
}

}  // namespace kerncap::link
