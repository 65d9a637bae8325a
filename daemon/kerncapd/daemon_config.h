// daemon_config.h: kerncapd's command line and config file (CLI11; a config
// file given with --config is TOML or INI with the long option names as keys,
// e.g. `log-level = "debug"`). Command-line values win over the file.
#ifndef KERNCAP_DAEMON_KERNCAPD_DAEMON_CONFIG_H_
#define KERNCAP_DAEMON_KERNCAPD_DAEMON_CONFIG_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/exit_codes.h"
#include "common/log.h"

namespace kerncap::kerncapd {

// Exit codes of kerncapd.
// kerncapd's exit codes, from the shared table (common/exit_codes.h,
// docs/EXIT_CODES.md).
inline constexpr int kExitOk = exit_code::kOk;
inline constexpr int kExitFailure = exit_code::kError;       // could not start (socket, TLS files, ...)
inline constexpr int kExitStoreBusy = exit_code::kConflict;  // the store is locked by another kerncapd
inline constexpr int kExitUsage = exit_code::kUsage;         // bad flags or config file

struct DaemonConfig {
  std::string store_dir;
  std::string socket;
  std::string agent_socket;
  std::string listen;  // HOST:PORT; empty: no TCP
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  bool require_client_cert = false;
  std::string token_file;
  // The user TCP clients act as (name or uid; empty: the daemon's own user,
  // or nobody when it runs as root). Never root.
  std::string tcp_user;
  // Group of the control and agent sockets (name or gid; empty: kerncapd's
  // own): the users of a node daemon (e.g. "kerncap").
  std::string socket_group;
  bool insecure_tcp = false;
  // TCP+TLS with neither a token nor verified client certificates (anyone
  // who can reach the port controls the daemon): refused unless set.
  bool allow_unauthenticated_tls = false;
  std::string config_file;
  log::Level log_level = log::Level::kInfo;
  std::string log_level_name = "info";
  uint64_t chunk_size = 1u << 20;
  int workers = 0;
  uint64_t ring_slot_mib = 8;
  uint32_t ring_slots = 8;
  // Host staging (agent ring) size per capturing agent; 0: ring_slots *
  // ring_slot_mib. When set, the slot count is derived from it.
  double staging_gib = 0;
  // Bound on all agents' rings together (0: none).
  double staging_total_gib = 0;
  double drain_timeout_s = 30;
  // Bounds that keep one peer from stalling or starving the others
  // (docs/LIMITS.md): active arms in all and per user, how long each agent
  // gets in a daemon-to-agents fan-out, and census bytes per agent and per
  // answer.
  uint64_t max_arms = 1024;
  uint64_t max_arms_per_user = 64;
  uint64_t fanout_timeout_ms = 5000;
  uint64_t census_mib_per_agent = 32;
  uint64_t census_total_mib = 96;
};

// The staging bound kerncapd applies when --staging-total-gib is 0: a
// quarter of the host's memory, and at least one full ring of
// `ring_bytes`.
uint64_t DefaultStagingTotalBytes(uint64_t ring_bytes);

struct ParseOutcome {
  bool run = false;  // false: exit with exit_code (help, version, error)
  int exit_code = kExitOk;
  DaemonConfig config;
};

// Parses argv (argv[0] is the program name). Help and version go to `out`,
// errors to `err`.
ParseOutcome ParseDaemonConfig(const std::vector<std::string>& argv, std::ostream& out,
                               std::ostream& err);

}  // namespace kerncap::kerncapd

#endif  // KERNCAP_DAEMON_KERNCAPD_DAEMON_CONFIG_H_
