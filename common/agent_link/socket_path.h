// socket_path.h: where the daemon's agent socket lives, computed the same way
// by kerncapd (default --agent-socket) and by the agent.
#ifndef KERNCAP_COMMON_AGENT_LINK_SOCKET_PATH_H_
#define KERNCAP_COMMON_AGENT_LINK_SOCKET_PATH_H_

#include <string>

namespace kerncap::link {

// Environment variable naming the agent socket; overrides the default.
inline constexpr char kAgentSocketEnv[] = "KERNCAP_AGENT_SOCKET";

// The default agent socket for this user: /run/kerncap/agent.sock for root,
// else $XDG_RUNTIME_DIR/kerncap/agent.sock, else /tmp/kerncap-<uid>/agent.sock
// (a per-user name, since /tmp is shared).
std::string DefaultAgentSocketPath();

// $KERNCAP_AGENT_SOCKET when set and non-empty, else DefaultAgentSocketPath().
std::string ResolveAgentSocketPath();

}  // namespace kerncap::link

#endif  // KERNCAP_COMMON_AGENT_LINK_SOCKET_PATH_H_
