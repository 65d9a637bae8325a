#include "common/agent_link/socket_path.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kerncap::link {
namespace {

bool StatExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

std::string DefaultAgentSocketPath() {
  if (::geteuid() == 0) return "/run/kerncap/agent.sock";
  const char* xdg = ::getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/kerncap/agent.sock";
  return "/tmp/kerncap-" + std::to_string(::geteuid()) + "/agent.sock";
}

std::string ResolveAgentSocketPath() {
  const char* env = ::getenv(kAgentSocketEnv);
  if (env != nullptr && env[0] != '\0') return env;
  return DefaultAgentSocketPath();
}

std::string ResolveAgentConnectPath(bool (*exists)(const std::string&)) {
  if (exists == nullptr) exists = &StatExists;
  const char* env = ::getenv(kAgentSocketEnv);
  if (env != nullptr && env[0] != '\0') return env;
  const std::string own = DefaultAgentSocketPath();
  if (::geteuid() == 0 || exists(own)) return own;
  if (exists(kSystemAgentSocketPath)) return kSystemAgentSocketPath;
  return own;
}

}  // namespace kerncap::link
