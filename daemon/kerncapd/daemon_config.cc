#include "daemon/kerncapd/daemon_config.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "CLI/CLI.hpp"
#include "common/agent_link/socket_path.h"
#include "common/cli_values.h"
#include "common/version.h"
#include "common/control/default_paths.h"


namespace kerncap::kerncapd {
namespace {

constexpr char kFooter[] = R"(
Defaults: store /var/lib/kerncap/store as root, else $XDG_DATA_HOME/kerncap/store
(~/.local/share/kerncap/store); control socket /run/kerncap/kerncapd.sock as root, else
$XDG_RUNTIME_DIR/kerncap/kerncapd.sock (/tmp/kerncap-$UID/ without XDG_RUNTIME_DIR); agent socket
agent.sock in the same directory ($KERNCAP_AGENT_SOCKET overrides). Sockets are mode 0660 in a
0750 directory.

Remote access: --listen HOST:PORT needs --tls-cert and --tls-key, and a way to know the
client: --token-file (a bearer token) and/or --tls-client-ca with --require-client-cert (mutual
TLS). TLS without either is refused unless --allow-unauthenticated-tls; plain TCP is refused
unless --insecure-tcp.

Signals: SIGTERM/SIGINT stop gracefully (in-flight captures get --drain-timeout seconds, then
are discarded; nothing half-written becomes visible). SIGHUP re-reads the config file and
applies log-level and the token file's contents, all or nothing: a config that does not parse,
an unreadable, empty or truncated token file, or a config that names no token file while a
token is in force is refused and the running settings stay (a reload never turns the token
off; a restart does). Other settings need a restart.

Examples:
  kerncapd                                              per-user daemon, default paths
  kerncapd --store=/data/kerncap --log-level=debug
  kerncapd --listen=0.0.0.0:7443 --tls-cert=node.pem --tls-key=node.key --token-file=/etc/kerncap/token
  kerncapd --config=/etc/kerncap/kerncapd.toml

Exit codes (the table all kerncap binaries share, docs/EXIT_CODES.md): 0 clean shutdown,
1 could not start, 2 bad flags or config file, 7 store or socket in use by another kerncapd.
)";

}  // namespace

uint64_t DefaultStagingTotalBytes(uint64_t ring_bytes) {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  const uint64_t memory =
      pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  return std::max(memory / 4, ring_bytes);
}

ParseOutcome ParseDaemonConfig(const std::vector<std::string>& argv, std::ostream& out,
                               std::ostream& err) {
  ParseOutcome outcome;
  DaemonConfig& c = outcome.config;
  service::PathEnv env = service::PathEnv::FromProcess();
  c.store_dir = service::DefaultStoreDir(env);
  c.socket = service::DefaultSocketPath(env);
  c.agent_socket = link::ResolveAgentSocketPath();

  CLI::App app{
      "kerncapd: the kerncap daemon — agent registry, arming, capture ingest into a "
      "deduplicated store, gRPC control API."};
  app.footer(kFooter);
  app.set_version_flag("--version", std::string("kerncapd ") + ::kerncap::kVersion);
  app.set_config("--config", "", "TOML/INI config file (keys are the long option names)");
  // A key that names no option (a typo, a garbage line, a half-written file)
  // fails the whole file: ignoring it would silently drop a setting, e.g.
  // the token file a reload must keep (reload.h).
  app.allow_config_extras(CLI::config_extras_mode::error);
  app.add_option("--store", c.store_dir, "store directory")->capture_default_str();
  app.add_option("--socket", c.socket, "gRPC control Unix socket")->capture_default_str();
  app.add_option("--agent-socket", c.agent_socket, "agent link Unix socket")->capture_default_str();
  app.add_option("--listen", c.listen, "also serve gRPC on TCP HOST:PORT (TLS)");
  app.add_option("--tls-cert", c.tls_cert, "server certificate chain (PEM)");
  app.add_option("--tls-key", c.tls_key, "server private key (PEM)");
  app.add_option("--tls-client-ca", c.tls_client_ca,
                 "CA bundle to verify client certificates (with --require-client-cert)");
  app.add_flag("--require-client-cert", c.require_client_cert,
               "reject TCP clients without a certificate signed by --tls-client-ca");
  app.add_option("--token-file", c.token_file,
                 "file with a bearer token TCP clients must send (re-read on SIGHUP)");
  app.add_option("--tcp-user", c.tcp_user,
                 "the user TCP clients act as, name or uid (default: kerncapd's own user; "
                 "nobody when kerncapd runs as root); never root");
  app.add_option("--socket-group", c.socket_group,
                 "group (name or gid) given access to the control and agent sockets: the users "
                 "of a node daemon (default: kerncapd's own group)");
  app.add_flag("--insecure-tcp", c.insecure_tcp, "allow --listen without TLS (testing only)");
  app.add_flag("--allow-unauthenticated-tls", c.allow_unauthenticated_tls,
               "allow --listen with TLS but neither --token-file nor --require-client-cert "
               "(anyone who reaches the port controls the daemon)");
  app.add_option("--log-level", c.log_level_name, "debug | info | warn | error")
      ->capture_default_str()
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  app.add_option("--chunk-size", c.chunk_size,
                 "store chunk size for a new store: power of two, 64KiB..4MiB")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  app.add_option("--workers", c.workers, "ingest worker threads (0: one per CPU)")
      ->capture_default_str()
      ->check(cli::WholeNumber(0, 1024));
  app.add_option("--ring-slot-mib", c.ring_slot_mib, "agent ring slot size in MiB")
      ->capture_default_str()
      ->check(cli::WholeNumber(1, 1024));
  app.add_option("--ring-slots", c.ring_slots, "agent ring slots per agent")
      ->capture_default_str()
      ->check(cli::WholeNumber(2, 65536));
  app.add_option("--staging-gib", c.staging_gib,
                 "host staging (agent ring) per capturing agent, in GiB; a snapshot that fits "
                 "keeps the application's pause at device-to-host copy time, a larger one "
                 "pauses longer (0: --ring-slots x --ring-slot-mib)")
      ->capture_default_str()
      ->check(cli::Number(0.0, 1024.0));
  app.add_option("--staging-total-gib", c.staging_total_gib,
                 "bound on the staging (rings) of all agents together, in GiB, never exceeded: "
                 "rings of armed but idle agents are asked back when a capture needs staging; "
                 "0: a quarter of the host's memory")
      ->capture_default_str()
      ->check(cli::Number(0.0, 1024.0));
  app.add_option("--max-arms", c.max_arms,
                 "active arms kerncapd holds in all (every arm costs each agent it applies to "
                 "a match per new kernel)")
      ->capture_default_str()
      ->check(cli::WholeNumber(1, 100000));
  app.add_option("--max-arms-per-user", c.max_arms_per_user,
                 "active arms one user (uid) may hold")
      ->capture_default_str()
      ->check(cli::WholeNumber(1, 100000));
  app.add_option("--fanout-timeout", c.fanout_timeout_ms,
                 "milliseconds each agent gets to take a push (arm, disarm, substitute, census "
                 "request); agents that do not are named in the answer and disconnected")
      ->capture_default_str()
      ->check(cli::WholeNumber(10, 60000));
  app.add_option("--census-mib-per-agent", c.census_mib_per_agent,
                 "MiB of kernel names a census (ListKernels) keeps per agent; the rest is "
                 "counted as left out and the answer says it was truncated")
      ->capture_default_str()
      ->check(cli::WholeNumber(1, 96));
  app.add_option("--census-total-mib", c.census_total_mib,
                 "MiB of kernel names one census answer keeps for all agents together")
      ->capture_default_str()
      ->check(cli::WholeNumber(1, 96));
  app.add_option("--drain-timeout", c.drain_timeout_s,
                 "seconds in-flight captures may take to finish at shutdown")
      ->capture_default_str()
      ->check(cli::Number(0.0, 3600.0));

  std::vector<const char*> cargv;
  for (const std::string& a : argv) cargv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(cargv.size()), cargv.data());
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e, out, err);
    outcome.exit_code = rc == 0 ? kExitOk : kExitUsage;
    return outcome;
  }
  if (CLI::Option* cfg = app.get_config_ptr(); cfg != nullptr && cfg->count() > 0) {
    c.config_file = cfg->as<std::string>();
  }
  log::ParseLevel(c.log_level_name, &c.log_level);

  auto fail = [&](const std::string& message) {
    err << "kerncapd: " << message << "\n";
    outcome.exit_code = kExitUsage;
    return outcome;
  };
  if (c.chunk_size < (64u << 10) || c.chunk_size > (4u << 20) ||
      (c.chunk_size & (c.chunk_size - 1)) != 0) {
    return fail("--chunk-size must be a power of two between 64KiB and 4MiB");
  }
  for (const std::string* p : {&c.store_dir, &c.socket, &c.agent_socket}) {
    if (p->empty()) return fail("--store, --socket and --agent-socket must not be empty");
  }
  // Relative paths are taken against the directory kerncapd was started in,
  // once: gRPC, the agents (which run elsewhere) and the status answer all
  // need the absolute path.
  for (std::string* p : {&c.store_dir, &c.socket, &c.agent_socket}) {
    if ((*p)[0] == '/') continue;
    std::error_code ec;
    std::filesystem::path abs = std::filesystem::absolute(*p, ec);
    if (ec) return fail("cannot resolve " + *p + " against the current directory: " + ec.message());
    *p = abs.lexically_normal().string();
  }
  if (c.socket == c.agent_socket) return fail("--socket and --agent-socket must differ");
  if (c.staging_gib > 0) {
    const uint64_t slot = c.ring_slot_mib << 20;
    const uint64_t slots = static_cast<uint64_t>(c.staging_gib * (1ull << 30)) / slot;
    if (slots < 2 || slots > 65536) {
      return fail("--staging-gib gives " + std::to_string(slots) +
                  " ring slots of --ring-slot-mib; need 2..65536");
    }
    c.ring_slots = static_cast<uint32_t>(slots);
  }
  if (c.max_arms_per_user > c.max_arms) {
    return fail("--max-arms-per-user (" + std::to_string(c.max_arms_per_user) +
                ") must not exceed --max-arms (" + std::to_string(c.max_arms) + ")");
  }
  if (c.census_mib_per_agent > c.census_total_mib) {
    return fail("--census-mib-per-agent must not exceed --census-total-mib");
  }
  if (c.staging_total_gib > 0 &&
      static_cast<uint64_t>(c.staging_total_gib * (1ull << 30)) < 2 * (c.ring_slot_mib << 20)) {
    return fail("--staging-total-gib must hold at least one ring of 2 slots of --ring-slot-mib");
  }
  if (!c.listen.empty()) {
    if (c.listen.rfind(':') == std::string::npos) return fail("--listen wants HOST:PORT");
    const bool tls = !c.tls_cert.empty() || !c.tls_key.empty();
    if (tls && (c.tls_cert.empty() || c.tls_key.empty())) {
      return fail("--tls-cert and --tls-key go together");
    }
    if (!tls && !c.insecure_tcp) {
      return fail(
          "refusing to serve TCP without TLS: give --tls-cert and --tls-key, or "
          "--insecure-tcp for a trusted test network");
    }
    if (!c.tls_client_ca.empty() && !c.require_client_cert) {
      // Verifying only the certificates clients choose to send would admit
      // every client that sends none.
      return fail(
          "--tls-client-ca without --require-client-cert would admit clients that send no "
          "certificate; add --require-client-cert");
    }
    if (tls && c.token_file.empty() && !c.require_client_cert && !c.allow_unauthenticated_tls) {
      return fail(
          "refusing to serve TCP+TLS without authenticating clients: give --token-file and/or "
          "--tls-client-ca with --require-client-cert, or --allow-unauthenticated-tls if "
          "anyone who can reach the port may control this daemon");
    }
  } else if (!c.tls_cert.empty() || !c.tls_key.empty() || c.require_client_cert) {
    return fail("TLS options need --listen");
  }
  if (c.require_client_cert && c.tls_client_ca.empty()) {
    return fail("--require-client-cert needs --tls-client-ca");
  }
  outcome.run = true;
  return outcome;
}

}  // namespace kerncap::kerncapd
