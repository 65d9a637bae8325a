#include "daemon/kerncapd/daemon.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/control/api_names.h"
#include "common/control/token_file.h"
#include "common/errno_status.h"
#include "common/file_util.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "daemon/import/reference_capture.h"
#include "daemon/kerncapd/reload.h"
#include "common/control/limits.h"


namespace kerncap::kerncapd {
namespace {

// In-flight gRPC calls (an import mid-stream) get this long after SIGTERM
// before they are cancelled; a cancelled import commits nothing.
constexpr auto kGrpcShutdownGrace = std::chrono::seconds(5);

std::string Hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

bool SocketAnswers(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// --socket-group: a group name or a numeric gid; -1 when empty.
absl::StatusOr<int64_t> ResolveGroup(const std::string& group) {
  if (group.empty()) return -1;
  uint32_t gid = 0;
  if (absl::SimpleAtoi(group, &gid)) return gid;
  ::group gr{};
  ::group* found = nullptr;
  std::vector<char> buf(16384);
  if (::getgrnam_r(group.c_str(), &gr, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--socket-group: no group named \"", group, "\""));
  }
  return found->gr_gid;
}

// Creates the socket's directory (0750, of `group` when >= 0) and clears a
// stale socket file. AlreadyExists when a live daemon answers on `path`.
absl::Status PrepareUnixSocket(const std::string& path, int64_t group) {
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path ", path, " is longer than the ",
                                                   sizeof(sockaddr_un{}.sun_path) - 1,
                                                   " bytes Unix sockets allow"));
  }
  std::string dir = DirName(path);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    KC_RETURN_IF_ERROR(MakeDirs(dir, 0750));
    if (::chmod(dir.c_str(), 0750) != 0) return ErrnoError(errno, absl::StrCat("chmod ", dir));
    if (group >= 0 &&
        ::chown(dir.c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(group)) != 0) {
      return ErrnoError(errno, absl::StrCat("chgrp ", dir));
    }
  } else if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    // E.g. /tmp/kerncap-<uid> created by someone else to intercept the socket.
    return absl::FailedPreconditionError(absl::StrCat(
        "socket directory ", dir, " is owned by uid ", st.st_uid, ", not by this user (uid ",
        ::geteuid(), ") or root; remove it or choose another --socket"));
  }
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " exists and is not a socket; remove it or choose another --socket"));
    }
    if (SocketAnswers(path)) {
      return absl::AlreadyExistsError(
          absl::StrCat("another kerncapd is already serving on ", path));
    }
    ::unlink(path.c_str());  // stale: its daemon is gone
  }
  return absl::OkStatus();
}

service::ReferenceImporter MakeReferenceImporter() {
  return [](const std::string& folder, CaptureSink& sink) {
    return import::ImportReferenceCapture(folder, sink);
  };
}

}  // namespace

Daemon::Daemon(DaemonConfig config, std::vector<std::string> argv)
    : config_(std::move(config)), argv_(std::move(argv)) {}

Daemon::~Daemon() { Shutdown(); }

int Daemon::Start() {
  started_unix_ms_ = absl::ToUnixMillis(absl::Now());
  store::StoreOptions opts;
  opts.dir = config_.store_dir;
  opts.chunk_size = static_cast<uint32_t>(config_.chunk_size);
  opts.workers = config_.workers;
  auto store = store::Store::Open(opts);
  if (!store.ok()) {
    // Unavailable is the store's one "locked by another kerncapd" answer;
    // everything else (a chunk-size mismatch, an unknown STORE format, ...)
    // is not busy and says what is wrong.
    const bool busy = store.status().code() == absl::StatusCode::kUnavailable;
    log::Error(busy ? "kerncapd.store_busy" : "kerncapd.store_open_failed",
               {{"store", config_.store_dir}, {"error", std::string(store.status().message())}});
    return busy ? kExitStoreBusy : kExitFailure;
  }
  store_ = std::move(*store);

  if (!config_.token_file.empty()) {
    auto token = service::ReadTokenFile(config_.token_file);
    if (!token.ok()) {
      log::Error("kerncapd.token_failed", {{"error", std::string(token.status().message())}});
      return kExitFailure;
    }
    authorizer_.SetToken(*token);
    absl::MutexLock lock(&mu_);
    token_ = *token;
  }

  if (absl::Status st = StartAgentLink(); !st.ok()) {
    log::Error("kerncapd.agent_link_failed",
               {{"socket", config_.agent_socket}, {"error", std::string(st.message())}});
    return st.code() == absl::StatusCode::kAlreadyExists ? kExitStoreBusy : kExitFailure;
  }
  if (absl::Status st = StartGrpc(); !st.ok()) {
    log::Error("kerncapd.grpc_failed", {{"socket", config_.socket},
                                        {"listen", config_.listen},
                                        {"error", std::string(st.message())}});
    return st.code() == absl::StatusCode::kAlreadyExists ? kExitStoreBusy : kExitFailure;
  }
  log::Info(
      "kerncapd.ready",
      {{"version", ::kerncap::kVersion},
       {"pid", ::getpid()},
       {"socket", config_.socket},
       {"agent_socket", config_.agent_socket},
       {"listen", config_.listen.empty() ? std::string()
                                         : absl::StrCat(config_.listen, " (port ", tcp_port_, ")")},
       {"store", config_.store_dir},
       {"chunk_size", store_->chunk_size()},
       {"tls", !config_.tls_cert.empty()},
       {"token", authorizer_.enabled()}});
  return kExitOk;
}

absl::Status Daemon::StartAgentLink() {
  KC_ASSIGN_OR_RETURN(const int64_t group, ResolveGroup(config_.socket_group));
  link::AgentLinkServerOptions opts;
  opts.socket_group = group;
  opts.socket_path = config_.agent_socket;
  opts.socket_mode = 0660;
  opts.slot_size = config_.ring_slot_mib << 20;
  opts.slot_count = config_.ring_slots;
  opts.max_total_ring_bytes = static_cast<uint64_t>(config_.staging_total_gib * (1ull << 30));
  opts.default_total_ring_bytes = DefaultStagingTotalBytes(opts.slot_size * opts.slot_count);
  opts.max_active_arms = config_.max_arms;
  opts.max_active_arms_per_owner = config_.max_arms_per_user;
  opts.fanout_timeout = absl::Milliseconds(config_.fanout_timeout_ms);
  opts.max_census_bytes_per_agent = config_.census_mib_per_agent << 20;
  opts.max_census_total_bytes = config_.census_total_mib << 20;
  opts.max_census_bytes_in_flight = std::max(opts.max_census_total_bytes, uint64_t{256} << 20);
  opts.chunk_size = store_->chunk_size();
  opts.drain_timeout = absl::Seconds(config_.drain_timeout_s);
  agent_link_ = std::make_unique<link::AgentLinkServer>();
  return agent_link_->Start(opts, *store_, bus_);
}

absl::Status Daemon::StartGrpc() {
  KC_ASSIGN_OR_RETURN(const int64_t group, ResolveGroup(config_.socket_group));
  KC_RETURN_IF_ERROR(PrepareUnixSocket(config_.socket, group));
  absl::StatusOr<service::TcpIdentity> tcp_identity = service::ResolveTcpIdentity(config_.tcp_user);
  if (!tcp_identity.ok()) return tcp_identity.status();
  KC_ASSIGN_OR_RETURN(unix_listener_, service::UnixListener::Bind(config_.socket, 0660, group));
  service::ControlServiceOptions options;
  options.tcp_identity = *tcp_identity;
  options.info.version = ::kerncap::kVersion;
  options.info.started_unix_ms = started_unix_ms_;
  options.info.pid = static_cast<uint32_t>(::getpid());
  options.info.hostname = Hostname();
  options.info.unix_socket = config_.socket;
  options.info.tcp_listen = config_.listen;
  options.info.agent_socket = config_.agent_socket;
  options.reference_importer = MakeReferenceImporter();
  options.authorizer = &authorizer_;
  service_ = std::make_unique<service::ControlService>(*store_, *agent_link_, bus_, options);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // The Unix socket is unix_listener_'s: every connection it accepts is
  // added to the server as a channel of its own (unix_listener.h).
  if (!config_.listen.empty()) {
    std::shared_ptr<grpc::ServerCredentials> creds;
    if (!config_.tls_cert.empty()) {
      // A client CA always comes with --require-client-cert (daemon_config):
      // verifying only the certificates clients choose to send admits all.
      grpc::SslServerCredentialsOptions ssl(
          config_.require_client_cert ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                      : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
      grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
      KC_ASSIGN_OR_RETURN(pair.cert_chain, ReadFile(config_.tls_cert));
      KC_ASSIGN_OR_RETURN(pair.private_key, ReadFile(config_.tls_key));
      ssl.pem_key_cert_pairs.push_back(std::move(pair));
      if (!config_.tls_client_ca.empty()) {
        KC_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFile(config_.tls_client_ca));
      }
      creds = grpc::SslServerCredentials(ssl);
    } else {
      log::Warn("kerncapd.insecure_tcp",
                {{"listen", config_.listen},
                 {"note", "plaintext TCP: anyone on the network can control this daemon"}});
      creds = grpc::InsecureServerCredentials();
    }
    builder.AddListeningPort(config_.listen, creds, &tcp_port_);
  }
  builder.SetMaxReceiveMessageSize(service::kMaxMessageBytes);
  builder.SetMaxSendMessageSize(service::kMaxMessageBytes);
  builder.RegisterService(service_.get());
  // Reflection v1 beside the plugin's v1alpha (reflection_v1.h).
  reflection_v1_ = std::make_unique<ReflectionV1Service>(std::vector<std::string>{
      api::kControlServiceName, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
      "grpc.reflection.v1alpha.ServerReflection"});
  builder.RegisterService(reflection_v1_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot listen on unix:", config_.socket,
                                               config_.listen.empty() ? "" : " or ",
                                               config_.listen));
  }
  if (!config_.listen.empty() && tcp_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", config_.listen));
  }
  unix_listener_->Start(server_.get());
  if (auto* health = server_->GetHealthCheckService(); health != nullptr) {
    // "" (the whole server) and the control service by name: Kubernetes'
    // gRPC probes and grpc_health_probe -service name it.
    health->SetServingStatus(api::kControlServiceName, true);
    health->SetServingStatus(true);
  }
  return absl::OkStatus();
}

void Daemon::RequestStop(int signo) {
  absl::MutexLock lock(&mu_);
  if (stop_requested_) {
    log::Warn("kerncapd.stop_already_requested", {{"signal", signo}});
    return;
  }
  stop_requested_ = true;
  stop_signal_ = signo;
}

void Daemon::Run() {
  int signo = 0;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&stop_requested_));
    signo = stop_signal_;
  }
  log::Info("kerncapd.stopping",
            {{"signal", signo == 0 ? std::string("none") : std::string(strsignal(signo))},
             {"ingests_in_flight", agent_link_ ? agent_link_->IngestsInFlight() : 0}});
  Shutdown();
  log::Info("kerncapd.stopped", {});
}

void Daemon::Reload() {
  std::ostringstream out, err;
  ParseOutcome parsed = ParseDaemonConfig(argv_, out, err);
  std::string running_token;
  {
    absl::MutexLock lock(&mu_);
    running_token = token_;
  }
  ReloadPlan plan = PlanReload(config_, running_token, parsed, err.str(),
                               [](const std::string& path) { return service::ReadTokenFile(path); });
  if (plan.refused) {
    // Nothing of this config is applied: the listener keeps authenticating
    // with the settings in force (reload.h).
    log::Error("kerncapd.reload_refused",
               {{"config", config_.config_file},
                {"reason", plan.reason},
                {"kept", "every running setting"},
                {"token", running_token.empty() ? "none" : "in force"}});
    return;
  }
  log::SetMinLevel(plan.log_level);
  if (plan.token.has_value()) {
    authorizer_.SetToken(*plan.token);
    absl::MutexLock lock(&mu_);
    token_ = *plan.token;
  }
  log::Info("kerncapd.reloaded", {{"config", parsed.config.config_file},
                                  {"log_level", plan.log_level_name},
                                  {"token", plan.token_state},
                                  {"restart_needed", plan.restart_needed}});
}

void Daemon::Shutdown() {
  if (server_ != nullptr) {
    if (auto* health = server_->GetHealthCheckService(); health != nullptr) {
      health->SetServingStatus(false);
    }
    service_->BeginShutdown();
    // No new local connections once the server is going away.
    if (unix_listener_ != nullptr) unix_listener_->Stop();
    server_->Shutdown(std::chrono::system_clock::now() + kGrpcShutdownGrace);
  }
  if (agent_link_ != nullptr) agent_link_->Shutdown(/*discard_in_flight=*/false);
  if (server_ != nullptr) server_->Wait();
  unix_listener_.reset();  // removes the socket file
  bus_.Shutdown();
  server_.reset();
  service_.reset();
  agent_link_.reset();
  store_.reset();
}

}  // namespace kerncap::kerncapd
