// daemon.h: one running kerncapd. Start order: store (its lock makes a second
// daemon on the same store fail) -> event bus -> agent link server -> gRPC
// server (control socket, optional TCP). Shutdown runs in reverse: stop the
// gRPC listener (in-flight RPCs get a few seconds), drain the agent link
// (in-flight captures get --drain-timeout, then are discarded), close the
// store.
//
// Thread-safety: RequestStop() and Reload() may be called from any thread
// (the signal thread); Start() and Run() from main only.
#ifndef KERNCAP_DAEMON_KERNCAPD_DAEMON_H_
#define KERNCAP_DAEMON_KERNCAPD_DAEMON_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "daemon/agent_link/agent_link_server.h"
#include "daemon/event_bus.h"
#include "daemon/kerncapd/daemon_config.h"
#include "daemon/kerncapd/reflection_v1.h"
#include "daemon/service/auth.h"
#include "daemon/service/control_service.h"
#include "daemon/service/unix_listener.h"
#include "daemon/store/store.h"

namespace kerncap::kerncapd {

class Daemon {
 public:
  // `argv` is kept to re-read the config file on Reload().
  Daemon(DaemonConfig config, std::vector<std::string> argv);
  ~Daemon();

  // Returns kExitOk, or the exit code to leave with (the reason is logged).
  int Start();
  // Blocks until RequestStop(), then shuts down.
  void Run();

  void RequestStop(int signo) ABSL_LOCKS_EXCLUDED(mu_);
  // Re-reads the config file; applies log level and the token file, all or
  // nothing, and never weakens authentication (reload.h).
  void Reload() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Status StartAgentLink();
  absl::Status StartGrpc();
  void Shutdown();

  DaemonConfig config_;
  const std::vector<std::string> argv_;
  int64_t started_unix_ms_ = 0;

  std::unique_ptr<store::Store> store_;
  EventBus bus_;
  std::unique_ptr<link::AgentLinkServer> agent_link_;
  service::TokenAuthorizer authorizer_;
  std::unique_ptr<service::ControlService> service_;
  std::unique_ptr<ReflectionV1Service> reflection_v1_;
  std::unique_ptr<grpc::Server> server_;
  // The control socket, accepted by kerncapd so calls know their caller.
  std::unique_ptr<service::UnixListener> unix_listener_;
  int tcp_port_ = 0;

  absl::Mutex mu_;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  int stop_signal_ ABSL_GUARDED_BY(mu_) = 0;
  // The bearer token in force ("" for none), for the next reload's checks.
  std::string token_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kerncap::kerncapd

#endif  // KERNCAP_DAEMON_KERNCAPD_DAEMON_H_
