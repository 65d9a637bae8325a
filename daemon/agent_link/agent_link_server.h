// agent_link_server.h: kerncapd's side of the agent link. Listens on the
// agent socket (a Unix stream socket, separate from the gRPC socket), serves
// each connected agent on its own thread (an AgentConnection,
// agent_connection.h: handshake, frames, the capture state machine), keeps
// the registry of live agents, and implements AgentControl over them and the
// arms (ArmRegistry, arm_registry.h). Agent capture streams become
// CaptureSink ingests; all rings together stay within a RingBudget
// (ring_budget.h), the server choosing which idle rings to ask back.
//
// Protocol: common/agent_link/{wire,messages,ring}.h. Per agent:
//   Hello -> Welcome(+ring memfd) -> [Arm/Disarm pushes] -> captures ...
// A misbehaving agent (malformed frame, wrong slot, region overflow, frames
// out of order) is disconnected with a logged reason; its in-flight capture is
// aborted (nothing half-visible) and other agents are unaffected. Failures of
// the sink (store full, ...) fail the capture but keep the agent connected.
//
// Capture ids are assigned when a capture begins (common/capture_id.h) and
// passed to CaptureIngest::Commit in the manifest, so capture_started,
// capture_progress and capture_failed events carry the same id as the commit.
//
// Thread-safety: all public methods are thread-safe.
#ifndef KERNCAP_DAEMON_AGENT_LINK_AGENT_LINK_SERVER_H_
#define KERNCAP_DAEMON_AGENT_LINK_AGENT_LINK_SERVER_H_

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/agent_link/messages.h"
#include "common/agent_link/wire.h"
#include "daemon/agent_link/agent_connection.h"
#include "daemon/agent_link/agent_control.h"
#include "daemon/agent_link/agent_link_options.h"
#include "daemon/agent_link/arm_registry.h"
#include "daemon/agent_link/ring_budget.h"
#include "daemon/agent_link/substitution_registry.h"
#include "daemon/capture_sink.h"
#include "daemon/event_bus.h"
#include "kerncap/v1/control.pb.h"

namespace kerncap::link {

class AgentLinkServer : public AgentControl, private ConnectionHost {
 public:
  AgentLinkServer();
  ~AgentLinkServer() override;  // Shutdown(/*discard_in_flight=*/true)
  AgentLinkServer(const AgentLinkServer&) = delete;
  AgentLinkServer& operator=(const AgentLinkServer&) = delete;

  // Binds the socket and starts serving. A stale socket file left by a dead
  // daemon is replaced; a live one is AlreadyExists. `sink` and `events` must
  // outlive the server (until Shutdown returns).
  absl::Status Start(const AgentLinkServerOptions& options, CaptureSink& sink,
                     EventBus& events);

  // Stops accepting agents and unlinks the socket. With discard_in_flight,
  // in-flight captures are aborted; otherwise they may finish (new ones are
  // refused) for up to options.drain_timeout. Then every agent is
  // disconnected and all threads joined. Idempotent.
  void Shutdown(bool discard_in_flight);

  // AgentControl:
  std::vector<v1::AgentInfo> ListAgents(const Caller& caller) override;
  // Asks every matching agent at once (one thread each), each for at most
  // options.census_timeout and options.max_census_kernels kernels.
  v1::ListKernelsResponse ListKernels(const v1::ListKernelsRequest& request,
                                      const Caller& caller) override;
  // A launch sample's counts onto an agent's census entries (see
  // LoadedKernel in control.proto).
  static void MergeLaunchSample(const SampleReportMsg& sample, v1::AgentKernels* agent);
  absl::StatusOr<v1::ArmInfo> Arm(const v1::ArmRequest& request, const Caller& caller) override;
  absl::StatusOr<std::vector<v1::ArmInfo>> Disarm(const v1::DisarmRequest& request,
                                                  const Caller& caller) override;
  std::vector<v1::ArmInfo> ListArms(bool include_finished, const Caller& caller) override;
  int IngestsInFlight() override;
  absl::StatusOr<v1::SubstitutionInfo> Substitute(const v1::SubstituteRequest& request,
                                                  const Caller& caller,
                                                  const std::string& preflight) override;
  absl::StatusOr<v1::SubstitutionInfo> Unsubstitute(const std::string& id,
                                                    const Caller& caller) override;
  std::vector<v1::SubstitutionInfo> ListSubstitutions(bool include_finished,
                                                      const Caller& caller) override;
  // Chunks declared by all captures in flight (CaptureLimits::max_inflight_chunks).
  uint64_t DeclaredChunksInFlight() const override { return declared_chunks_in_flight_.load(); }
  // Bytes of all agent rings now allocated.
  uint64_t RingBytesInUse() { return ring_budget_.InUse(); }
  uint64_t RingBudgetBytes() { return ring_budget_.max_total_bytes(); }

  const std::string& socket_path() const { return options_.socket_path; }

  // Serves one agent connected on `fd` on the calling thread, exactly as an
  // accepted connection is served (handshake, frames, cleanup), returning
  // when it disconnects. For the fuzzer (tests/fuzz) and tests that drive a
  // connection synchronously. The server must be started.
  void ServeForTesting(UniqueFd fd);

 private:
  void AcceptLoop();
  void Serve(std::shared_ptr<AgentConnection> conn);
  void ReapFinished() ABSL_LOCKS_EXCLUDED(mu_);
  void ExpireArms() ABSL_LOCKS_EXCLUDED(mu_);
  // For arms a registry call finished: pushes Disarm to every agent and
  // publishes arm_changed; the agents not reached in time ("id: why").
  std::vector<std::string> PushDisarms(const std::vector<FinishedArm>& finished)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Sends to every target at once, each within its own bound; the agents
  // that failed ("id: why").
  std::vector<std::string> PushToAll(const std::vector<std::shared_ptr<AgentConnection>>& targets,
                                     const std::function<LinkStatus(AgentConnection&)>& send);
  // Disconnects agents asked for their ring that keep it past
  // options.ring_reclaim_timeout (their bytes go back to the budget).
  void DropRingHolders() ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<std::shared_ptr<AgentConnection>> ConnectionsSnapshot() ABSL_LOCKS_EXCLUDED(mu_);
  void Wake();
  // Sends RingRevoke to idle ring holders (least recently capturing first)
  // until they hold `bytes`; returns the bytes asked back.
  uint64_t RevokeIdleRings(AgentConnection* requester, uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

  // ConnectionHost (a private base: only the connections it creates see it).
  ConnectionHost& host() { return *this; }
  bool RegisterAgent(const std::shared_ptr<AgentConnection>& conn,
                     std::vector<ArmMsg>* arms) ABSL_LOCKS_EXCLUDED(mu_) override;
  bool Draining() const override { return draining_.load(); }
  uint64_t ChargeRing(AgentConnection* requester, uint64_t slot_size, uint32_t slot_count,
                      bool may_reclaim, bool pinned) ABSL_LOCKS_EXCLUDED(mu_) override;
  void UnchargeRing(uint64_t bytes, bool pinned) override {
    ring_budget_.Uncharge(bytes, pinned);
  }
  bool ChargeDeclaredChunks(uint64_t chunks) override;
  void UnchargeDeclaredChunks(uint64_t chunks) override;
  absl::StatusOr<std::unique_ptr<CaptureIngest>> BeginIngest() override;
  void IngestFinished() ABSL_LOCKS_EXCLUDED(mu_) override;
  std::string ReserveArm(const std::string& arm_id, const HelloMsg& hello, uint32_t uid,
                         const CaptureBeginMsg& begin,
                         google::protobuf::Map<std::string, std::string>* tags) override;
  void ReleaseArm(const std::string& arm_id, const std::string& capture_id, bool committed,
                  const std::string& launch_shape) override;
  // Publishes arm_changed; unknown arms are ignored.
  void NoteSkipped(const std::string& arm_id, uint32_t uid, v1::SkippedDispatch skipped) override;
  void OnSubstitutionReport(const std::string& agent_id,
                            const SubstitutionReportMsg& report) override;

  AgentLinkServerOptions options_;
  CaptureSink* sink_ = nullptr;
  EventBus* events_ = nullptr;
  UniqueFd listen_fd_;
  UniqueFd wake_fd_;  // eventfd: wakes the accept loop (new arm, shutdown)
  dev_t socket_dev_ = 0;
  ino_t socket_ino_ = 0;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> draining_{false};
  std::atomic<int> ingests_in_flight_{0};
  std::atomic<uint64_t> declared_chunks_in_flight_{0};
  std::atomic<uint64_t> census_bytes_in_flight_{0};  // kept by census answers being built

  RingBudget ring_budget_;              // thread-safe on its own
  SubstitutionRegistry substitutions_;  // thread-safe on its own

  absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::shared_ptr<AgentConnection>> agents_ ABSL_GUARDED_BY(mu_);
  // Connections whose thread has ended and awaits join.
  std::vector<std::shared_ptr<AgentConnection>> finished_ ABSL_GUARDED_BY(mu_);
  // Every connection whose thread is not yet joined (including handshaking
  // ones); bounded by options.max_agents.
  std::vector<std::shared_ptr<AgentConnection>> all_connections_ ABSL_GUARDED_BY(mu_);
  // Thread-safe on its own; Arm and RegisterAgent also hold mu_ around it,
  // so that a new arm and a new agent are seen together (agents_ and arms).
  ArmRegistry arms_;
};

}  // namespace kerncap::link

#endif  // KERNCAP_DAEMON_AGENT_LINK_AGENT_LINK_SERVER_H_
