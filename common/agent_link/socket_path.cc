#include "common/agent_link/socket_path.h"

#include <stdlib.h>
#include <unistd.h>

namespace kerncap::link {

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

}  // namespace kerncap::link
