// default_paths.h: where kerncapd keeps its store and sockets when no flag
// says otherwise. kerncapd, kerncapctl (and, by reading this file, the Python
// client) all use these, so a plain `kerncapd &` and `kerncapctl status` meet.
//
//                 root                        user
//   runtime dir   /run/kerncap                $XDG_RUNTIME_DIR/kerncap,
//                                             else /tmp/kerncap-<uid>
//   control sock  <runtime dir>/kerncapd.sock
//   agent sock    <runtime dir>/agent.sock   (common/agent_link/socket_path.h owns it)
//   store         /var/lib/kerncap/store      $XDG_DATA_HOME/kerncap/store,
//                                             else $HOME/.local/share/kerncap/store
//   client config $XDG_CONFIG_HOME/kerncap/config.toml, else $HOME/.config/kerncap/config.toml
//
// Clients (kerncapctl, the Python client: client/python/src/kerncap/_connection.py
// follows the same rule) pick $KERNCAP_SOCKET, else the per-user socket when a
// per-user kerncapd runs, else the node's system daemon (/run/kerncap/, whose
// socket is for the group kerncap) when one runs; see DefaultClientSocketPath.
#ifndef KERNCAP_COMMON_CONTROL_DEFAULT_PATHS_H_
#define KERNCAP_COMMON_CONTROL_DEFAULT_PATHS_H_

#include <sys/types.h>

#include <string>

namespace kerncap::service {

// The process facts the defaults depend on, captured once so tests can fake them.
struct PathEnv {
  uid_t euid = 0;
  std::string xdg_runtime_dir;
  std::string xdg_data_home;
  std::string home;
  std::string kerncap_socket;  // $KERNCAP_SOCKET
  std::string xdg_config_home;
  std::string kerncap_config;  // $KERNCAP_CONFIG
  // Whether a socket file exists at a path (stat); tests replace it.
  bool (*exists)(const std::string& path) = nullptr;

  static PathEnv FromProcess();
};

std::string DefaultRuntimeDir(const PathEnv& env);
std::string DefaultSocketPath(const PathEnv& env);
std::string DefaultStoreDir(const PathEnv& env);
// The node's system kerncapd (run as root): /run/kerncap/kerncapd.sock.
inline constexpr char kSystemSocketPath[] = "/run/kerncap/kerncapd.sock";
// $KERNCAP_SOCKET when set; else DefaultSocketPath when its socket exists (a
// per-user kerncapd runs) or when this is root; else kSystemSocketPath when
// that exists; else DefaultSocketPath (so "is kerncapd running?" names the
// socket a plain `kerncapd &` would make).
std::string DefaultClientSocketPath(const PathEnv& env);
// A hint for a denied connection to `socket`: how to get access to the
// system daemon's socket, or "" for another path.
std::string SocketAccessHint(const std::string& socket);
// kerncapctl's contexts file: $KERNCAP_CONFIG when set, else
// $XDG_CONFIG_HOME/kerncap/config.toml, else $HOME/.config/kerncap/config.toml.
std::string DefaultClientConfigPath(const PathEnv& env);

}  // namespace kerncap::service

#endif  // KERNCAP_COMMON_CONTROL_DEFAULT_PATHS_H_
