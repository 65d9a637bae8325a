// agent_connection.h: one connected agent, as kerncapd serves it: the
// handshake (Hello -> Welcome, the arms that apply, the ring or not yet),
// frame dispatch, the agent's ring and slots, and the state machine of the
// capture in flight (CaptureBegin, RegionBegin, SlotFilled, ChunksUnchanged,
// CodeObject, CaptureEnd/Abort) that feeds one CaptureIngest.
//
// What it needs from the server that accepted it (arms, the ring budget, the
// in-flight bounds, the sink, registration) goes through ConnectionHost,
// implemented by AgentLinkServer; the server drives it through the public
// methods below. Protocol: common/agent_link/{wire,messages,ring}.h.
//
// A misbehaving agent (malformed frame, wrong slot, region overflow, frames
// out of order) makes ServeFrames return an error: the server then
// disconnects it (Cleanup aborts its capture, nothing half-visible). A
// capture that breaks a bound or that the sink fails is failed alone
// (CaptureResult with the error) and the agent stays connected.
//
// Thread-safety: one reader thread (the server's Serve) calls Handshake,
// ServeFrames and Cleanup and owns the capture state. Send, Kick,
// ReleaseSlot, Revoke, info and the ring accessors may be called from any
// thread (Arm pushes, ingest callbacks, other agents' ring reclaim).
#ifndef KERNCAP_DAEMON_AGENT_LINK_AGENT_CONNECTION_H_
#define KERNCAP_DAEMON_AGENT_LINK_AGENT_CONNECTION_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/agent_link/messages.h"
#include "common/agent_link/ring.h"
#include "common/agent_link/wire.h"
#include "daemon/agent_link/agent_link_options.h"
#include "daemon/agent_link/remembered_chunks.h"
#include "daemon/capture_sink.h"
#include "daemon/event_bus.h"
#include "kerncap/v1/control.pb.h"
#include "kerncap/v1/manifest.pb.h"

namespace kerncap::link {

class AgentConnection;

// What a connection asks of its server. All methods are called from the
// connection's reader thread, except UnchargeRing (also from its destructor).
class ConnectionHost {
 public:
  virtual ~ConnectionHost() = default;

  // Registers `conn` (its Hello read, its agent id set) as a live agent and
  // fills `arms` with the active arms that apply to its process, in arming
  // order, atomically with respect to new arms: an arm is either in `arms`
  // or pushed to the agent after this returns. False (nothing registered)
  // when the server is stopping.
  virtual bool RegisterAgent(const std::shared_ptr<AgentConnection>& conn,
                             std::vector<ArmMsg>* arms) = 0;
  // True once the server drains for shutdown: new captures are refused.
  virtual bool Draining() const = 0;

  // Ring budget: the bytes of a ring of 2..slot_count slots that may be
  // created (0: none may); with may_reclaim, idle rings of other agents may
  // be asked back first. Bytes charged go back with UnchargeRing.
  // A pinned ring (its agent cannot give it back) fits in the budget's
  // pinned share (AgentLinkServerOptions::max_pinned_ring_share).
  virtual uint64_t ChargeRing(AgentConnection* requester, uint64_t slot_size,
                              uint32_t slot_count, bool may_reclaim, bool pinned) = 0;
  virtual void UnchargeRing(uint64_t bytes, bool pinned) = 0;

  // Declared chunks of all captures in flight (CaptureLimits::
  // max_inflight_chunks): false (nothing charged) when `chunks` do not fit.
  virtual bool ChargeDeclaredChunks(uint64_t chunks) = 0;
  virtual void UnchargeDeclaredChunks(uint64_t chunks) = 0;
  virtual uint64_t DeclaredChunksInFlight() const = 0;

  // A new ingest from the sink, counted as in flight until IngestFinished.
  virtual absl::StatusOr<std::unique_ptr<CaptureIngest>> BeginIngest() = 0;
  virtual void IngestFinished() = 0;

  // Arms (ArmRegistry::Reserve/Release/NoteSkipped; the server publishes
  // and pushes what they change).
  virtual std::string ReserveArm(const std::string& arm_id, const HelloMsg& hello, uint32_t uid,
                                 const CaptureBeginMsg& begin,
                                 google::protobuf::Map<std::string, std::string>* tags) = 0;
  virtual void ReleaseArm(const std::string& arm_id, const std::string& capture_id,
                          bool committed, const std::string& launch_shape) = 0;
  virtual void NoteSkipped(const std::string& arm_id, uint32_t uid,
                           v1::SkippedDispatch skipped) = 0;

  // A substitution's state as the agent reports it.
  virtual void OnSubstitutionReport(const std::string& agent_id,
                                    const SubstitutionReportMsg& report) = 0;
};

// The capture in progress on a connection (its reader thread only).
struct CaptureRegionState {
  ImageKind image;
  int handle;
  uint64_t size;
};
struct CaptureInFlight {
  uint64_t token = 0;
  bool failed = false;  // CaptureResult already sent; ignore until End/Abort
  std::string capture_id;
  std::string arm_id;
  std::string launch_shape;  // CaptureBegin's, reserved with the arm (per-shape arms)
  bool arm_reserved = false;
  std::unique_ptr<CaptureIngest> ingest;
  v1::CaptureManifest manifest;
  // Regions of the ingest, by region number; only kept while the capture
  // has not failed (a failed capture's frames are only numbered).
  std::vector<CaptureRegionState> regions;
  uint32_t region_count = 0;  // RegionBegin frames seen
  bool saw_post = false;
  uint64_t declared = 0;
  uint64_t declared_chunks = 0;  // charged to the host's in-flight bound
  uint32_t code_objects = 0;
  uint64_t code_object_bytes = 0;
  uint64_t received = 0;
  absl::Time last_progress;
  // "chunk_fingerprints": per region number, (chunk, fingerprint) of chunks
  // sent as bytes, remembered once the capture commits; bytes named by
  // ChunksKnown instead of sent.
  std::map<uint32_t, std::vector<std::pair<uint64_t, ChunkFingerprint>>> told;
  uint64_t told_count = 0;
  uint64_t known_bytes = 0;
};

class AgentConnection : public std::enable_shared_from_this<AgentConnection> {
 public:
  // `host`, `options` and `events` must outlive the connection.
  AgentConnection(ConnectionHost& host, const AgentLinkServerOptions& options, EventBus& events,
                  UniqueFd fd);
  ~AgentConnection();
  AgentConnection(const AgentConnection&) = delete;
  AgentConnection& operator=(const AgentConnection&) = delete;

  // Reader thread: reads the Hello, registers with the host, sends the
  // Welcome (with the ring unless the agent takes it lazily).
  LinkStatus Handshake();
  // Reader thread: handles frames until the agent disconnects (Ok) or
  // breaks the protocol (the error).
  LinkStatus ServeFrames();
  // Reader thread: aborts the capture in flight (if any) because the
  // connection ends for `reason`, and drops the socket.
  void Cleanup(const std::string& reason);

  // Runs `body` (the server's serving of this connection) on the
  // connection's own thread; Join waits for it (a no-op without one).
  void StartThread(std::function<void()> body);
  void Join();

  // Sends one message, the whole frame within options.send_timeout_ms
  // (waiting for another sender counts too); a failed send kicks the
  // connection (the reader then cleans up), because a half-written frame
  // desynchronizes the stream.
  template <typename M>
  LinkStatus Send(const M& msg, std::string_view payload = {}, const int* fds = nullptr,
                  size_t fd_count = 0) {
    return SendWithin(absl::Milliseconds(options_.send_timeout_ms), msg, payload, fds, fd_count);
  }
  // Send, within `timeout` (at most options.send_timeout_ms): what a
  // daemon-to-agents fan-out gives each agent. An agent that does not take
  // the frame in time is disconnected (it reconnects as a new agent and
  // gets the arms then); one whose other sender holds the socket that long
  // is left to that sender's own deadline.
  template <typename M>
  LinkStatus SendWithin(absl::Duration timeout, const M& msg, std::string_view payload = {},
                        const int* fds = nullptr, size_t fd_count = 0)
      ABSL_LOCKS_EXCLUDED(send_mu_) {
    return SendImpl(/*kick=*/true, timeout, msg, payload, fds, fd_count);
  }
  // SendWithin, but a failed send leaves the Kick to the caller (who records
  // why first: the reader's cleanup then finds the reason in place).
  template <typename M>
  LinkStatus SendWithinDeferKick(absl::Duration timeout, const M& msg,
                                 std::string_view payload = {}) ABSL_LOCKS_EXCLUDED(send_mu_) {
    return SendImpl(/*kick=*/false, timeout, msg, payload, nullptr, 0);
  }

 private:
  template <typename M>
  LinkStatus SendImpl(bool kick, absl::Duration timeout, const M& msg, std::string_view payload,
                      const int* fds, size_t fd_count) ABSL_LOCKS_EXCLUDED(send_mu_) {
    timeout = std::min(timeout, absl::Milliseconds(options_.send_timeout_ms));
    const absl::Time deadline = absl::Now() + timeout;
    if (!send_mu_.LockWhenWithDeadline(absl::Condition::kTrue, deadline)) {
      send_mu_.Unlock();
      return LinkStatus::Error("another send to the agent did not finish within " +
                               absl::FormatDuration(timeout));
    }
    LinkStatus status = LinkStatus::Error("connection already failed");
    if (!send_failed_) {
      const int64_t left = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
      status = SendMessageWithin(fd_.get(), static_cast<int>(std::min<int64_t>(left, 1 << 30)),
                                 msg, payload, fds, fd_count);
      if (!status.ok()) {
        send_failed_ = true;
        if (kick) Kick();
      }
    }
    send_mu_.Unlock();
    return status;
  }

 public:
  // Refuses a connection not served (too many agents): the Error message,
  // waiting at most 100 ms for the socket.
  void Refuse(const std::string& message);
  // Shuts the socket down: the reader sees the end of the stream.
  void Kick();

  // Returns a slot of ring `generation` to the agent. Idempotent per
  // hand-over; a slot of a ring since released is not the agent's to get.
  // Called by the sink (through a slot lease) when it is done with the bytes.
  void ReleaseSlot(uint64_t generation, uint32_t slot);

  // Set in Handshake before registration, then immutable.
  const std::string& agent_id() const { return agent_id_; }
  // The Hello as decoded, with pid, hostname, process name and command line
  // replaced by what the socket's credentials and /proc say.
  const HelloMsg& hello() const { return hello_; }
  // The agent process's user (SO_PEERCRED): whose agent and captures these
  // are, and which arms reach it.
  uint32_t uid() const { return uid_; }
  bool registered() const { return registered_; }
  v1::AgentInfo info();

  // Ring reclaim, read by other connections' threads.
  bool CanBeAskedForRing() const {
    return release_capable_ && ring_held_.load() > 0 && !capturing_.load() &&
           !revoke_sent_.load();
  }
  uint64_t ring_held() const { return ring_held_.load(); }
  int64_t last_capture_ms() const { return last_capture_ms_.load(); }
  // Asks the agent for its ring back (once per ring).
  void Revoke(const std::string& reason);
  // When the last Revoke was sent and the ring is still held (unix ms; 0:
  // none outstanding): an agent that keeps it is disconnected.
  int64_t revoke_outstanding_since_ms() const {
    return ring_held_.load() > 0 ? revoke_sent_ms_.load() : 0;
  }

  // Log lines (and events) this agent's frames cause, per
  // options.agent_log_*: true when one may be written now; otherwise it is
  // counted as suppressed. Any thread.
  bool MayLog() ABSL_LOCKS_EXCLUDED(log_mu_);
  // Writes the "agent_link.suppressed" line for lines suppressed so far
  // (none: nothing).
  void FlushSuppressed() ABSL_LOCKS_EXCLUDED(log_mu_);
  uint64_t lines_suppressed() ABSL_LOCKS_EXCLUDED(log_mu_);

  // The kernel census (feature "kernel_census"): every page of the agent's
  // loaded kernels, keeping at most `max_kernels` (the rest are counted in
  // left_out), waiting at most `timeout` in all. Any thread but the
  // reader's; one census at a time per connection. FailedPrecondition when
  // the agent does not offer the census, DeadlineExceeded when it does not
  // answer in time, Unavailable when the connection ends meanwhile.
  struct KernelCensus {
    std::vector<LoadedKernelInfo> kernels;
    uint64_t left_out = 0;
    uint64_t bytes = 0;      // names and modules kept
    std::string truncated;   // the bound that cut it short
  };
  // Byte bounds (0: none): `max_bytes` kept for this agent; `shared`, when
  // set, a byte budget charged for every entry kept (the whole answer's and
  // the daemon's in-flight census bytes), refused entries ending the census.
  // A census cut short says which bound in `truncated`; `shared` keeps
  // what it was charged (its owner gives it back).
  struct CensusBudget {
    virtual ~CensusBudget() = default;
    // Charges `bytes`, or returns why not (nothing charged).
    virtual std::string Charge(uint64_t bytes) = 0;
  };
  absl::StatusOr<KernelCensus> RequestKernels(absl::Duration timeout, size_t max_kernels,
                                              uint64_t max_bytes = 0,
                                              CensusBudget* shared = nullptr);

  // A launch sample (feature "launch_sample"): the agent counts its launches
  // for `duration`, then reports them (waiting at most `answer_timeout` for
  // the report). The agent is told to stop on every way out. Any thread but
  // the reader's; one sample at a time per connection. FailedPrecondition
  // when the agent does not offer sampling or one already runs,
  // DeadlineExceeded without a report in time, Unavailable when the
  // connection ends meanwhile, Internal with the agent's own error.
  absl::StatusOr<SampleReportMsg> SampleLaunches(absl::Duration duration,
                                                 absl::Duration answer_timeout);
  bool offers_launch_sample() const { return sample_; }

 private:
  using RegionState = CaptureRegionState;
  using Capture = CaptureInFlight;

  LinkStatus OnCaptureBegin(const Frame& frame);
  LinkStatus OnRegionBegin(const Frame& frame);
  LinkStatus OnSlotFilled(const Frame& frame);
  LinkStatus OnChunksUnchanged(const Frame& frame);
  LinkStatus OnKnownChunksQuery(const Frame& frame);
  LinkStatus OnChunksKnown(const Frame& frame);
  LinkStatus OnChunkFingerprints(const Frame& frame);
  // The feature is spoken and the payload is whole fingerprints.
  LinkStatus CheckFingerprintFrame(const Frame& frame, const char* what,
                                   std::vector<ChunkFingerprint>* fps);
  // A declared region and a non-empty range of its chunks (nothing to check
  // once the capture failed).
  LinkStatus CheckChunkRange(const CaptureInFlight& c, uint32_t region, uint64_t first_chunk,
                             uint64_t count, const char* what);
  // After a commit: what the told chunks were stored as.
  void RememberCommitted(const CaptureInFlight& c);
  LinkStatus OnCodeObject(const Frame& frame);
  LinkStatus OnCaptureEnd(const Frame& frame);
  LinkStatus OnCaptureAbort(const Frame& frame);
  LinkStatus OnRingRequest(const Frame& frame);
  LinkStatus OnRingRelease(const Frame& frame);
  LinkStatus OnDispatchSkipped(const Frame& frame);
  LinkStatus OnSubstitutionReport(const Frame& frame);
  // A page of the census some RequestKernels waits for (a late page, after
  // its request gave up, is dropped).
  LinkStatus OnKernelsReport(const Frame& frame);
  // The report some SampleLaunches waits for (checked against the protocol's
  // bounds; a late one is dropped).
  LinkStatus OnSampleReport(const Frame& frame);
  // Creates, maps and charges this connection's ring; the memfd to send.
  // With may_reclaim (a capture is waiting for it), idle rings of other
  // agents may be asked back to make room.
  LinkResult<UniqueFd> CreateRing(bool may_reclaim);
  // Fails the current capture (not the connection): aborts the ingest, tells
  // the agent, publishes capture_failed. Later frames of it are ignored.
  void FailCapture(const std::string& reason);
  // Ends an ingest's life (commit or abort) for the in-flight accounting
  // and returns its declared chunks to the in-flight bound.
  void DropIngest(const std::string& abort_reason);
  void ReleaseDeclaredChunks();
  LinkStatus CheckToken(uint64_t token, const char* what);
  void PublishProgress(bool force);

  ConnectionHost& host_;
  const AgentLinkServerOptions& options_;
  EventBus& events_;
  UniqueFd fd_;
  std::thread thread_;
  std::string agent_id_;  // set once in Handshake, then immutable
  HelloMsg hello_;
  uint32_t uid_ = 0;      // set once in Handshake (before registration)
  std::shared_ptr<RingMapping> ring_;
  RingLayout layout_{0, 0};    // slot_count 0 until the ring exists
  uint64_t ring_charged_ = 0;  // bytes charged to the host's ring budget
  bool lazy_ring_ = false;
  bool post_unchanged_ = false;   // both sides speak "post_unchanged"
  bool fingerprints_ = false;     // both sides speak "chunk_fingerprints"
  // Reader thread only; what this connection's committed captures sent.
  std::unique_ptr<RememberedChunks> remembered_;
  // Reader thread only; zero chunks, which every connection may name.
  std::unique_ptr<ZeroChunkFingerprints> zero_chunks_;
  bool release_capable_ = false;  // lazy_ring + ring_release; set before registration
  bool census_ = false;           // the agent offers "kernel_census"; set before registration
  bool registered_ = false;
  // Mirrors of reader-thread state for other threads (ring reclaim).
  std::atomic<uint64_t> ring_held_{0};
  std::atomic<bool> capturing_{false};
  std::atomic<bool> revoke_sent_{false};
  std::atomic<int64_t> last_capture_ms_{0};
  std::atomic<int64_t> revoke_sent_ms_{0};

  // The log limiter (MayLog).
  absl::Mutex log_mu_;
  double log_tokens_ ABSL_GUARDED_BY(log_mu_) = -1;  // -1: full bucket at first use
  absl::Time log_refilled_ ABSL_GUARDED_BY(log_mu_);
  uint64_t log_suppressed_ ABSL_GUARDED_BY(log_mu_) = 0;       // since the last summary
  uint64_t log_suppressed_total_ ABSL_GUARDED_BY(log_mu_) = 0;

  absl::Mutex send_mu_;
  bool send_failed_ ABSL_GUARDED_BY(send_mu_) = false;
  absl::Mutex slot_mu_;
  std::vector<bool> daemon_owns_ ABSL_GUARDED_BY(slot_mu_);
  uint64_t ring_generation_ ABSL_GUARDED_BY(slot_mu_) = 0;  // +1 per ring
  absl::Mutex info_mu_;
  v1::AgentInfo info_ ABSL_GUARDED_BY(info_mu_);

  std::optional<Capture> capture_;

  // The census: one request in flight at a time (census_call_mu_); the
  // reader hands the page it waits for over under census_mu_.
  absl::Mutex census_call_mu_ ABSL_ACQUIRED_BEFORE(census_mu_);
  absl::Mutex census_mu_;
  absl::CondVar census_cv_;
  uint64_t census_next_id_ ABSL_GUARDED_BY(census_mu_) = 1;
  uint64_t census_waiting_id_ ABSL_GUARDED_BY(census_mu_) = 0;  // 0: nobody waits
  uint64_t census_waiting_offset_ ABSL_GUARDED_BY(census_mu_) = 0;
  std::optional<KernelsReportMsg> census_page_ ABSL_GUARDED_BY(census_mu_);
  bool census_closed_ ABSL_GUARDED_BY(census_mu_) = false;  // the connection ended
  // Launch samples: the report SampleLaunches waits for, under census_mu_
  // (the same end of the connection wakes both).
  bool sample_ = false;  // the agent offers "launch_sample"; set before registration
  uint64_t sample_next_id_ ABSL_GUARDED_BY(census_mu_) = 1;
  uint64_t sample_running_id_ ABSL_GUARDED_BY(census_mu_) = 0;  // 0: none
  bool sample_stopping_ ABSL_GUARDED_BY(census_mu_) = false;    // Stop sent, report awaited
  std::optional<SampleReportMsg> sample_report_ ABSL_GUARDED_BY(census_mu_);
};

}  // namespace kerncap::link

#endif  // KERNCAP_DAEMON_AGENT_LINK_AGENT_CONNECTION_H_
