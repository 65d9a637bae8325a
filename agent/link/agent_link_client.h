// agent_link_client.h: the agent's side of the agent link (see
// common/agent_link/messages.h for the conversation and wire.h for bytes).
//
// Loaded into arbitrary applications, so: std-only (no Abseil/protobuf/gRPC),
// no exceptions escape, no exit()/abort(), and a missing or dying daemon never
// disturbs the application — every call degrades to "not armed" or an error.
//
//   AgentLinkClient client(options);
//   client.Start();                       // returns promptly even without kerncapd
//   ...
//   if (auto arm = client.ShouldCapture(demangled, mangled, device)) {  // 1 atomic load when unarmed
//     auto session = client.BeginCapture(begin_info, arg_blob);
//     uint32_t r = session->AddRegion(region).value();
//     auto slot = session->AcquireSlot();   // blocks for a free ring slot
//     ... fill slot->data (D2H copy) ...
//     session->SubmitSlot(*slot, r, offset, length);
//     std::string capture_id = session->End().value();   // or EndAsync()
//   }
//
// Outgoing frames go through a per-connection sender thread, so a capturing
// thread never waits for the daemon to read: once the bytes are in the ring
// and EndAsync() has queued CaptureEnd, the application may continue; the
// daemon's verdict arrives later through options.on_capture_result.
//
// Lazy rings (options.lazy_ring): the daemon gives no ring at connect time;
// the client asks for one as soon as an arm applies to this process (or at
// the first BeginCapture), so idle processes cost no staging memory and the
// ring is mapped (and registered by on_ring_mapped) before the capture. The
// ring goes back (on_ring_unmapping, then RingRelease) once no arm applies
// and no capture uses it, or when the daemon revokes it for another agent's
// capture; the next arm or capture asks again.
//
// Connection management: a background thread connects, sends Hello, applies
// Arm/Disarm, recycles slots (SlotFree) and collects CaptureResults. When the
// daemon goes away, arms are dropped and the thread retries with exponential
// backoff, reconnecting as a new agent when the daemon returns. After fork(),
// the child's copy of every client is reset (pthread_atfork) and reconnects
// as a new agent with its own pid; the parent is unaffected.
//
// Thread-safety: all methods are thread-safe. Captures are serialized: one
// CaptureSession per client at a time (BeginCapture waits for the previous
// one). A CaptureSession must not outlive its client.
#ifndef KERNCAP_AGENT_LINK_AGENT_LINK_CLIENT_H_
#define KERNCAP_AGENT_LINK_AGENT_LINK_CLIENT_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <unordered_map>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "agent/link/capture_session.h"
#include "common/agent_link/messages.h"
#include "common/agent_link/result.h"
#include "common/agent_link/selector.h"

namespace kerncap::agent {

class LaunchSampler;  // launch_sampler.h

using link::LinkResult;
using link::LinkStatus;

struct AgentLinkClientOptions {
  // Empty: $KERNCAP_AGENT_SOCKET, else the default path (socket_path.h).
  std::string socket_path;
  // Identity sent in Hello. pid is always the current pid at connect time;
  // empty hostname / cmdline / process_name are filled from the system, an
  // unknown rank (rank.rank < 0) from the launcher's environment
  // (launcher_rank.h).
  link::HelloMsg identity;
  // Start() waits at most this long for the first handshake, so that arms
  // active at startup apply to the first kernels the application launches.
  int initial_wait_ms = 500;
  int retry_initial_ms = 100;   // backoff between connection attempts ...
  int retry_max_ms = 5000;      // ... doubling up to this
  int send_timeout_ms = 5000;   // a daemon that stops reading drops the link
  int handshake_timeout_ms = 5000;
  // Called on the link thread right after a ring is mapped, and just before
  // it is unmapped (when the last session using a dead link lets go). The
  // CUDA agent registers the ring here (cudaHostRegister) so device-to-host
  // copies land directly in slots. Must not call back into the client.
  std::function<void(uint8_t* base, uint64_t bytes)> on_ring_mapped;
  std::function<void(uint8_t* base, uint64_t bytes)> on_ring_unmapping;
  // Ask for the ring only when an arm applies (daemon feature "lazy_ring";
  // a daemon without it sends the ring in the Welcome as before).
  bool lazy_ring = false;
  // Called on the link thread with the daemon's verdict on a capture ended
  // with EndAsync() (or lost with the connection). Must not call back into
  // the client.
  std::function<void(const struct CaptureOutcome&)> on_capture_result;
  // Called whenever armed() changes, right after the change (on the thread
  // that changed it, with the client's lock held: it must be quick and must
  // not call back into the client). The CUDA agent switches its launch
  // callbacks here.
  std::function<void()> on_armed_changed;
  // The kernels of the code objects the process has loaded (feature
  // "kernel_census": announced only when set). Called on the link thread when
  // the daemon asks (once per page); must not call back into the client. The
  // list must keep its order between calls; the client pages and bounds it
  // (kernel_census.h).
  std::function<std::vector<link::LoadedKernelInfo>()> list_kernels;
  // Launch sampling (feature "launch_sample": announced only when set; must
  // outlive the client): the client starts and stops its samples as the
  // daemon says, and ends a running one when the link drops.
  LaunchSampler* launch_sampler = nullptr;
  // Live substitution (feature "substitution": announced only when
  // on_substitute is set). Called on the link thread; must not block and
  // must not call back into the client except SendSubstitutionReport.
  // on_substitute: a Substitute and its code object; an error refuses it
  // (the client reports the refusal). on_unsubstitute: an Unsubstitute.
  // on_link_lost: the connection dropped; every substitution must end now.
  std::function<link::LinkStatus(const link::SubstituteMsg&, std::string code_object)>
      on_substitute;
  std::function<void(const link::UnsubstituteMsg&)> on_unsubstitute;
  std::function<void()> on_link_lost;
  // Matching arms on the launching thread: a kernel no arm has an answer for
  // yet is matched there only while the work (NameMatcher::MatchCost summed
  // over the arms without one) stays within inline_match_budget steps (tens
  // of microseconds). Beyond it the name goes to a matcher thread; the launch
  // that found it waits at most match_wait_us for the answer and otherwise
  // proceeds uncaptured, as do later launches of that kernel until the
  // answer is in. Those dispatches are then counted against the arms in
  // order, and one an arm would have taken is reported skipped on it (and
  // given back, so a later matching dispatch is taken, for arms without nth).
  uint64_t inline_match_budget = 1u << 16;
  int match_wait_us = 2000;
};

// Arms one agent holds at once (the daemon's default bound on active arms);
// further arms are ignored, and last_error() says so.
inline constexpr size_t kMaxAgentArms = 1024;

// The daemon's verdict on a capture ended with EndAsync().
struct CaptureOutcome {
  uint64_t token = 0;
  std::string capture_id;  // set on success
  std::string error;       // set on failure
  double seconds_after_end = 0;  // from EndAsync() to the verdict
};

struct ArmMatch {
  std::string arm_id;
  uint64_t dispatch_index = 0;  // 1-based index among this arm's matching dispatches
  std::string launch_shape;     // the shape key's text when the arm is per-shape
};

class AgentLinkClient {
 public:
  explicit AgentLinkClient(AgentLinkClientOptions options);
  ~AgentLinkClient();  // Stop()
  AgentLinkClient(const AgentLinkClient&) = delete;
  AgentLinkClient& operator=(const AgentLinkClient&) = delete;

  // Starts the background connection thread and waits up to
  // options.initial_wait_ms for the first handshake. Idempotent.
  void Start();
  // Disconnects and joins the background thread. Idempotent.
  void Stop();

  // Hot path. With no active arm this is a single atomic load. `shape`
  // gives the dispatch's shape key; it is called (at most once per mode) only
  // when a per-shape arm's pattern matches, and without it (null or empty)
  // per-shape arms do not take the dispatch.
  std::optional<ArmMatch> ShouldCapture(std::string_view demangled, std::string_view mangled,
                                        int32_t device,
                                        const link::LaunchShapeFn* shape = nullptr);
  // The ids of the active arms that would select this dispatch, without
  // counting it (ShouldCapture counts). Empty with no active arm.
  std::vector<std::string> ArmsMatching(std::string_view demangled, std::string_view mangled,
                                        int32_t device);
  bool armed() const { return armed_.load(std::memory_order_acquire); }
  // The flag behind armed(), for hot paths that read it directly (one
  // atomic load per launch). Valid for the client's lifetime.
  const std::atomic<bool>* armed_flag() const { return &armed_; }

  // Tells the daemon (feature "dispatch_skipped") that a dispatch selected by
  // ShouldCapture was not captured, and why. With give_back, the arm's
  // capture is returned to it so a later matching dispatch is taken (only
  // possible for arms without nth); msg.retried says whether that happened.
  // Returns msg.retried.
  bool ReportSkipped(link::DispatchSkippedMsg msg, bool give_back);
  // Queues a SubstitutionReport (dropped when there is no link or the
  // daemon lacks "substitution"). Any thread.
  void SendSubstitutionReport(const link::SubstitutionReportMsg& msg);

  // Waits until every frame queued so far has been written to the daemon
  // (or the link is gone). For process exit: a capture ended with EndAsync()
  // must reach the daemon before the process disappears.
  bool FlushOutgoing(int timeout_ms);
  // Waits until no capture is in flight (an EndAsync verdict arrived;
  // on_capture_result may still be running on the link thread).
  bool WaitCaptureSettled(int timeout_ms);
  std::optional<CaptureOutcome> last_capture_outcome() const;
  // Bytes of the current ring; 0 when none is mapped (lazy and not granted).
  uint64_t ring_bytes() const;

  // Starts a capture (serialized with other captures of this client). The
  // token in `begin` is assigned here; `argument_blob` is the raw kernarg
  // buffer.
  LinkResult<std::unique_ptr<CaptureSession>> BeginCapture(link::CaptureBeginMsg begin,
                                                           std::string_view argument_blob,
                                                           int timeout_ms = 60000);

  // Introspection (tests, diagnostics).
  bool connected() const;
  std::string agent_id() const;
  // Increments on every successful handshake.
  uint64_t connection_generation() const;
  // Waits until connection_generation() > `after` (and connected).
  bool WaitConnected(uint64_t after_generation, int timeout_ms);
  // Waits until at least `n` arms are active.
  bool WaitArms(size_t n, int timeout_ms);
  size_t active_arms() const;
  std::string last_error() const;

 private:
  friend class CaptureSession;
  using Link = internal::ClientLink;
  struct LocalArm {
    std::string arm_id;
    link::Selector selector;
    link::NameMatcher matcher;
    link::DispatchCounter counter;
    uint64_t seq = 0;  // the daemon's arming order
    uint64_t local_id = 0;  // unique in this client (KernelVerdict)
  };
  // Which arms a kernel's name selects, as of arm set `generation` (one
  // lookup per launch instead of one per arm; arms added later make it
  // stale, arms removed are only never found).
  struct KernelVerdict {
    uint64_t generation = 0;
    std::vector<uint64_t> arms;  // local ids
  };
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  static constexpr size_t kMaxVerdicts = 1u << 16;

  std::optional<ArmMatch> ShouldCaptureSlow(std::string_view demangled, std::string_view mangled,
                                            int32_t device, const link::LaunchShapeFn* shape);
  // Off-thread matching (options.inline_match_budget). A kernel whose match
  // is pending, and the devices of its dispatches that went uncaptured
  // meanwhile (at most kMaxMissedPerKernel; the rest counted).
  struct PendingMatch {
    std::string demangled;
    std::string mangled;
    std::vector<int32_t> missed;
    uint64_t missed_uncounted = 0;
  };
  static constexpr size_t kMaxPendingMatches = 256;
  static constexpr size_t kMaxMissedPerKernel = 4096;
  // The work of matching this kernel against the live arms without a cached
  // answer (mu_ held).
  uint64_t UncachedCostLocked(std::string_view demangled, std::string_view mangled,
                              int32_t device, int64_t now);
  // Queues the kernel for the matcher thread (mu_ held); false when the
  // queue is full. `*queued` says whether this call queued it.
  bool QueueMatchLocked(std::string_view demangled, std::string_view mangled, bool* queued);
  void MatchLoop();
  // The answer is in: the missed dispatches of `p`, counted against the arms
  // in order; the skips to report.
  std::vector<link::DispatchSkippedMsg> ReplayMissedLocked(const PendingMatch& p);
  LinkResult<std::unique_ptr<CaptureSession>> BeginCaptureImpl(link::CaptureBeginMsg begin,
                                                               std::string_view argument_blob,
                                                               int timeout_ms);
  void Run();
  std::shared_ptr<Link> Connect(std::string* error);
  void ReadLoop(const std::shared_ptr<Link>& link);
  LinkStatus HandleFrame(const std::shared_ptr<Link>& link, link::Frame& frame);
  void AddArmLocked(const link::ArmMsg& arm);
  void RecomputeArmedLocked();
  // Lazy ring: sends RingRequest once for `link` when an arm applies (or
  // `force`).
  void MaybeRequestRingLocked(const std::shared_ptr<Link>& link, bool force);
  LinkStatus OnRingGrant(const std::shared_ptr<Link>& link, link::Frame& frame);
  // Lazy ring with "ring_release": unmaps the ring (on the sender thread)
  // and sends RingRelease when no capture uses it, every slot is back, and
  // no arm applies any more or the daemon revoked it.
  void MaybeReleaseRingLocked(const std::shared_ptr<Link>& link);
  // Delivers an EndAsync verdict (mu_ held by caller; callback after unlock).
  std::optional<CaptureOutcome> SettleAsyncLocked(const std::shared_ptr<Link>& link,
                                                  std::string capture_id, std::string error);
  void StartThreadLocked();
  static void ForkPrepare();
  static void ForkParent();
  static void ForkChild();
  void ResetInChild();

  const AgentLinkClientOptions options_;
  std::string socket_path_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;
  bool stop_ = false;
  std::thread* thread_ = nullptr;  // raw: leaked (not joined) in a fork child
  std::shared_ptr<Link> link_;      // current connection, null when disconnected
  int connecting_fd_ = -1;          // socket of a handshake in progress
  uint64_t generation_ = 0;
  bool first_attempt_done_ = false;
  bool capture_active_ = false;
  uint64_t next_token_ = 0;
  std::vector<LocalArm> arms_;
  // The arm that produced the last ticket, if ShouldCapture removed it
  // because its count was used up (ReportSkipped may give the capture back).
  std::optional<LocalArm> last_taken_;
  std::optional<CaptureOutcome> last_outcome_;
  std::string last_error_;
  std::atomic<bool> armed_{false};
  // Off-thread matching, under mu_.
  std::condition_variable match_cv_;
  std::map<std::string, PendingMatch, std::less<>> pending_matches_;  // by mangled (or demangled) name
  std::deque<std::string> match_queue_;
  std::unordered_map<std::string, KernelVerdict, NameHash, std::equal_to<>> verdicts_;
  uint64_t arm_generation_ = 1;    // +1 per arm added
  uint64_t next_local_arm_id_ = 1;
  std::atomic<bool> match_stop_{false};  // the matcher thread stops between arms
  std::thread* match_thread_ = nullptr;  // raw: leaked (not joined) in a fork child
  uint64_t matches_off_thread_ = 0;      // kernels matched by the matcher thread
  uint64_t dispatches_unevaluated_ = 0;  // launches that went uncaptured meanwhile

 public:
  // Introspection: kernels matched off the launching thread, and dispatches
  // that went uncaptured while their match was pending.
  uint64_t matches_off_thread() const;
  uint64_t dispatches_unevaluated() const;
};

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_LINK_AGENT_LINK_CLIENT_H_
