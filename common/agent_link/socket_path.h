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

// $KERNCAP_AGENT_SOCKET when set and non-empty, else DefaultAgentSocketPath():
// where kerncapd listens.
std::string ResolveAgentSocketPath();

// The node's system kerncapd's agent socket.
inline constexpr char kSystemAgentSocketPath[] = "/run/kerncap/agent.sock";

// Where the agent connects: ResolveAgentSocketPath(), except that a non-root
// process whose own default socket does not exist (no per-user kerncapd runs)
// and that has no $KERNCAP_AGENT_SOCKET takes the system daemon's socket when
// that exists. The same rule as the clients' (common/control/default_paths.h).
// `exists` answers whether a socket file is at a path (nullptr: stat).
std::string ResolveAgentConnectPath(bool (*exists)(const std::string&) = nullptr);

}  // namespace kerncap::link

#endif  // KERNCAP_COMMON_AGENT_LINK_SOCKET_PATH_H_
