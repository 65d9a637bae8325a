// agent_link_server.h: kerncapd's side of the agent link. Listens on the
// agent socket (a Unix stream socket, separate from the gRPC socket), serves
// each connected agent on its own thread, keeps the registry of live agents
// and of arms, and turns agent capture streams into CaptureSink ingests.
//
// Protocol: common/agent_link/{wire,messages,ring}.h. Per agent:
//   Hello -> Welcome(+ring memfd) -> [Arm/Disarm pushes] -> captures ...
// A misbehaving agent (malformed frame, wrong slot, region overflow, frames
// out of order) is disconnected with a logged reason; its in-flight capture is
// aborted (nothing half-visible) and other agents are unaffected. Failures of
// the sink (store full, ...) fail the capture but keep the agent connected.
//
// Capture ids are assigned here when a capture begins (common/capture_id.h)
// and passed to CaptureIngest::Commit in the manifest, so capture_started,
// capture_progress and capture_failed events carry the same id as the commit.
//
// Thread-safety: all public methods are thread-safe.
#ifndef KERNCAP_DAEMON_AGENT_LINK_AGENT_LINK_SERVER_H_
#define KERNCAP_DAEMON_AGENT_LINK_AGENT_LINK_SERVER_H_

#include <sys/types.h>

#include <atomic>
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
#include "absl/time/time.h"
#include "common/agent_link/messages.h"
#include "common/agent_link/ring.h"
#include "common/agent_link/selector.h"
#include "common/agent_link/wire.h"
#include "daemon/agent_link/agent_control.h"
#include "daemon/agent_link/substitution_registry.h"
#include "daemon/capture_sink.h"
#include "daemon/event_bus.h"
#include "kerncap/v1/control.pb.h"

namespace kerncap::link {

// Bounds on what one agent capture may declare. Every size and count an agent
// sends is checked against these, the frame limits and the ring before
// anything is allocated from it; a capture that exceeds one fails with a
// CaptureResult error naming the bound, the agent stays connected and
// kerncapd keeps serving. The ingest keeps ~40 bytes per declared chunk, so
// the chunk bounds are what bound the daemon's memory per capture and in all.
struct CaptureLimits {
  uint32_t max_regions = 1u << 18;              // RegionBegin frames per capture
  uint64_t max_chunks = 1ull << 23;             // declared chunks, pre + post
  uint64_t max_inflight_chunks = 1ull << 24;    // declared chunks of all captures
  uint64_t max_argument_blob = 1ull << 20;      // CaptureBegin payload
  uint32_t max_code_objects = 1024;             // CodeObject frames per capture
  uint64_t max_code_object_bytes = 4ull << 30;  // their payloads together
  size_t max_kernel_name_bytes = kMaxKernelNameBytes;
  size_t max_name_bytes = 4096;                 // region and code object names
};

struct AgentLinkServerOptions {
  std::string socket_path;  // required; its directory is created if missing
  int socket_mode = 0660;
  // Ring per agent (pre-faulted in the daemon: slot_size * slot_count bytes).
  // Agents that speak "lazy_ring" get theirs only when they may capture (an
  // arm applies to them); others get it at connect time.
  uint64_t slot_size = kDefaultSlotSize;
  uint32_t slot_count = kDefaultSlotCount;
  // Bound on the memory of all rings together (0: none), never exceeded. A
  // ring asked for when the budget is short gets fewer slots (at least 2:
  // its captures pause the application longer, backpressure); when not even
  // 2 slots are left, the daemon asks idle rings back (RingRevoke, agents
  // with "ring_release") and waits up to ring_reclaim_timeout for them, so
  // staging goes to captures in flight; failing that the ring is refused
  // with a message saying the budget is in use.
  uint64_t max_total_ring_bytes = 0;
  absl::Duration ring_reclaim_timeout = absl::Seconds(2);
  bool lazy_rings = true;  // honor agents' "lazy_ring"; false: always eager
  // Must equal the store's chunk size: WriteRegion offsets are multiples of it.
  uint32_t chunk_size = 1u << 20;
  int max_agents = 256;  // one thread each; further connections are refused
  FrameLimits limits;
  CaptureLimits capture_limits;
  // An agent that stops reading for this long is disconnected (protects the
  // Arm RPC and ingest callbacks from blocking on a stuck application).
  int send_timeout_ms = 5000;
  absl::Duration hello_timeout = absl::Seconds(5);
  // Shutdown(false) waits at most this long for in-flight captures.
  absl::Duration drain_timeout = absl::Seconds(30);
  absl::Duration progress_interval = absl::Milliseconds(250);
  size_t max_finished_arms = 1000;  // finished arms kept for ListArms(true)
};

class AgentLinkServer : public AgentControl {
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
  std::vector<v1::AgentInfo> ListAgents() override;
  absl::StatusOr<v1::ArmInfo> Arm(const v1::ArmRequest& request) override;
  absl::StatusOr<std::vector<v1::ArmInfo>> Disarm(const v1::DisarmRequest& request) override;
  std::vector<v1::ArmInfo> ListArms(bool include_finished) override;
  int IngestsInFlight() override;
  absl::StatusOr<v1::SubstitutionInfo> Substitute(const v1::SubstituteRequest& request) override;
  absl::StatusOr<v1::SubstitutionInfo> Unsubstitute(const std::string& id) override;
  std::vector<v1::SubstitutionInfo> ListSubstitutions(bool include_finished) override;
  // Chunks declared by all captures in flight (CaptureLimits::max_inflight_chunks).
  uint64_t DeclaredChunksInFlight() const { return declared_chunks_in_flight_.load(); }
  // Bytes of all agent rings now allocated.
  uint64_t RingBytesInUse() ABSL_LOCKS_EXCLUDED(budget_mu_);

  const std::string& socket_path() const { return options_.socket_path; }

  // Serves one agent connected on `fd` on the calling thread, exactly as an
  // accepted connection is served (handshake, frames, cleanup), returning
  // when it disconnects. For the fuzzer (tests/fuzz) and tests that drive a
  // connection synchronously. The server must be started.
  void ServeForTesting(UniqueFd fd);

  class Connection;  // one agent; defined in the .cc

 private:
  struct ArmEntry {
    v1::ArmInfo info;
    Selector selector;
    // The arm's kernel matcher, to check that a capture an agent says this
    // arm selected is one it can have selected (guarded by mu_).
    std::shared_ptr<NameMatcher> matcher;
    uint64_t seq = 0;      // arming order: competing arms are served oldest first
    uint32_t pending = 0;  // captures begun but not yet committed/failed
  };

  void AcceptLoop();
  void Serve(std::shared_ptr<Connection> conn);
  void ReapFinished() ABSL_LOCKS_EXCLUDED(mu_);
  void IngestFinished() ABSL_LOCKS_EXCLUDED(mu_);
  void ExpireArms() ABSL_LOCKS_EXCLUDED(mu_);
  // Finishes an arm (DONE/EXPIRED/DISARMED): pushes Disarm to agents and
  // publishes arm_changed.
  void FinishArmLocked(ArmEntry& arm, v1::ArmState state,
                       std::vector<std::pair<DisarmReason, v1::ArmInfo>>* to_push)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PushDisarms(const std::vector<std::pair<DisarmReason, v1::ArmInfo>>& finished);
  void TrimFinishedArmsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::shared_ptr<Connection>> ConnectionsSnapshot() ABSL_LOCKS_EXCLUDED(mu_);
  void Wake();

  // Arm accounting used by connections.
  // Reserves one capture of `arm_id` for a dispatch of `begin`'s kernel on
  // `begin.device` in the process `hello` describes; an error message when
  // that arm is not active, does not apply to that dispatch, or has its
  // captures.
  std::string ReserveArm(const std::string& arm_id, const HelloMsg& hello,
                         const CaptureBeginMsg& begin) ABSL_LOCKS_EXCLUDED(mu_);
  // Charges `chunks` declared chunks to the in-flight bound; false (nothing
  // charged) when they do not fit.
  bool ChargeDeclaredChunks(uint64_t chunks);
  // Ring budget. ChargeRing charges the bytes of the largest ring of
  // `slot_size` slots, between 2 and `slot_count` of them, that fits; 0 when
  // not even 2 fit (nothing charged). With may_reclaim and less than a full
  // ring free, idle rings of other agents are asked back first (waiting up
  // to ring_reclaim_timeout for them).
  uint64_t ChargeRing(Connection* requester, uint64_t slot_size, uint32_t slot_count,
                      bool may_reclaim) ABSL_LOCKS_EXCLUDED(budget_mu_, mu_);
  void UnchargeRing(uint64_t bytes) ABSL_LOCKS_EXCLUDED(budget_mu_);
  // Sends RingRevoke to idle ring holders (least recently capturing first)
  // until they hold `bytes`; returns the bytes asked back.
  uint64_t RevokeIdleRings(Connection* requester, uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  void ReleaseArm(const std::string& arm_id, const std::string& capture_id, bool committed)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Records a dispatch the arm selected that its agent did not capture (in
  // ArmInfo.skipped, so `kerncapctl arms` shows why) and publishes
  // arm_changed. Unknown arms are ignored.
  void NoteSkipped(const std::string& arm_id, v1::SkippedDispatch skipped)
      ABSL_LOCKS_EXCLUDED(mu_);

  friend class Connection;

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

  absl::Mutex budget_mu_ ABSL_ACQUIRED_AFTER(mu_);
  uint64_t ring_bytes_in_use_ ABSL_GUARDED_BY(budget_mu_) = 0;

  absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::shared_ptr<Connection>> agents_ ABSL_GUARDED_BY(mu_);
  // Connections whose thread has ended and awaits join.
  std::vector<std::shared_ptr<Connection>> finished_ ABSL_GUARDED_BY(mu_);
  // Every connection whose thread is not yet joined (including handshaking
  // ones); bounded by options.max_agents.
  std::vector<std::shared_ptr<Connection>> all_connections_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, ArmEntry> arms_ ABSL_GUARDED_BY(mu_);
  uint64_t next_arm_seq_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<std::string> finished_arm_order_ ABSL_GUARDED_BY(mu_);
  SubstitutionRegistry substitutions_;  // thread-safe on its own
};

}  // namespace kerncap::link

#endif  // KERNCAP_DAEMON_AGENT_LINK_AGENT_LINK_SERVER_H_
