#include "daemon/agent_link/agent_link_server.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/agent_link/messages.h"
#include "common/capture_id.h"
#include "common/errno_status.h"
#include "common/file_util.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "daemon/agent_link/wire_convert.h"

namespace kerncap::link {
namespace {

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

std::string RandomId(absl::string_view prefix) {
  static absl::Mutex mu(absl::kConstInit);
  static std::mt19937_64* rng = nullptr;
  absl::MutexLock lock(&mu);
  if (rng == nullptr) {
    std::random_device rd;
    rng = new std::mt19937_64((static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                              static_cast<uint64_t>(absl::GetCurrentTimeNanos()));
  }
  return absl::StrFormat("%s%016x", prefix, (*rng)());
}

bool ArmFinished(const v1::ArmInfo& arm) { return arm.state() != v1::ARM_ACTIVE; }

DisarmReason DisarmReasonFor(v1::ArmState state) {
  switch (state) {
    case v1::ARM_DONE: return DisarmReason::kDone;
    case v1::ARM_EXPIRED: return DisarmReason::kExpired;
    default: return DisarmReason::kDisarmed;
  }
}

void SetRecvTimeout(int fd, absl::Duration d) {
  timeval tv = absl::ToTimeval(d);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

}  // namespace

// The capture in progress on a connection (its reader thread only). At
// namespace scope so that std::optional sees a complete type.
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
  bool arm_reserved = false;
  std::unique_ptr<CaptureIngest> ingest;
  v1::CaptureManifest manifest;
  // Regions of the ingest, by region number; only kept while the capture
  // has not failed (a failed capture's frames are only numbered).
  std::vector<CaptureRegionState> regions;
  uint32_t region_count = 0;  // RegionBegin frames seen
  bool saw_post = false;
  uint64_t declared = 0;
  uint64_t declared_chunks = 0;  // charged to declared_chunks_in_flight_
  uint32_t code_objects = 0;
  uint64_t code_object_bytes = 0;
  uint64_t received = 0;
  absl::Time last_progress;
};

// One connected agent. The reader thread (Serve) owns the capture state; the
// slot table and the socket's write side are shared with ingest callbacks and
// Arm pushes and have their own locks.
class AgentLinkServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(AgentLinkServer* server, UniqueFd fd) : server_(server), fd_(std::move(fd)) {}

  ~Connection() {
    // The ingest (and with it any slot callbacks) must go before the ring.
    if (capture_.has_value()) ReleaseDeclaredChunks();
    capture_.reset();
    if (ring_charged_ > 0) server_->UnchargeRing(ring_charged_);
  }

  // Sends one message; a failed send kicks the connection (the reader then
  // cleans up), because a half-written frame desynchronizes the stream.
  template <typename M>
  LinkStatus Send(const M& msg, std::string_view payload = {}, const int* fds = nullptr,
                  size_t fd_count = 0) {
    absl::MutexLock lock(&send_mu_);
    if (send_failed_) return LinkStatus::Error("connection already failed");
    LinkStatus status = SendMessage(fd_.get(), msg, payload, fds, fd_count);
    if (!status.ok()) {
      send_failed_ = true;
      Kick();
    }
    return status;
  }

  void Kick() { ::shutdown(fd_.get(), SHUT_RDWR); }

  // Returns a slot of ring `generation` to the agent. Idempotent per
  // hand-over; a slot of a ring since released is not the agent's to get.
  void ReleaseSlot(uint64_t generation, uint32_t slot) {
    {
      absl::MutexLock lock(&slot_mu_);
      if (generation != ring_generation_) return;
      if (slot >= daemon_owns_.size() || !daemon_owns_[slot]) return;
      daemon_owns_[slot] = false;
    }
    SlotFreeMsg msg;
    msg.slot = slot;
    (void)Send(msg);
  }

  std::string agent_id() const { return agent_id_; }
  // Read by other connections' threads (ring reclaim).
  bool CanBeAskedForRing() const {
    return release_capable_ && ring_held_.load() > 0 && !capturing_.load() &&
           !revoke_sent_.load();
  }
  uint64_t ring_held() const { return ring_held_.load(); }
  int64_t last_capture_ms() const { return last_capture_ms_.load(); }
  // Asks the agent for its ring back (once per ring).
  void Revoke(const std::string& reason) {
    if (revoke_sent_.exchange(true)) return;
    RingRevokeMsg msg;
    msg.reason = reason;
    (void)Send(msg);
  }
  v1::AgentInfo info() {
    absl::MutexLock lock(&info_mu_);
    return info_;
  }

  using RegionState = CaptureRegionState;
  using Capture = CaptureInFlight;

  LinkStatus Handshake();
  LinkStatus ServeFrames();
  // Aborts the capture in flight (if any) because the connection ends for
  // `reason`, and drops the socket.
  void Cleanup(const std::string& reason);

 private:
  friend class AgentLinkServer;

  LinkStatus OnCaptureBegin(const Frame& frame);
  LinkStatus OnRegionBegin(const Frame& frame);
  LinkStatus OnSlotFilled(const Frame& frame);
  LinkStatus OnChunksUnchanged(const Frame& frame);
  LinkStatus OnCodeObject(const Frame& frame);
  LinkStatus OnCaptureEnd(const Frame& frame);
  LinkStatus OnCaptureAbort(const Frame& frame);
  LinkStatus OnRingRequest(const Frame& frame);
  LinkStatus OnRingRelease(const Frame& frame);
  LinkStatus OnDispatchSkipped(const Frame& frame);
  LinkStatus OnSubstitutionReport(const Frame& frame);
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

  AgentLinkServer* server_;
  UniqueFd fd_;
  std::thread thread_;
  std::string agent_id_;  // set once in Handshake, then immutable
  HelloMsg hello_;
  std::shared_ptr<RingMapping> ring_;
  RingLayout layout_{0, 0};  // slot_count 0 until the ring exists
  uint64_t ring_charged_ = 0;  // bytes counted in server_->ring_bytes_in_use_
  bool lazy_ring_ = false;
  bool post_unchanged_ = false;  // both sides speak "post_unchanged"
  bool release_capable_ = false;  // lazy_ring + ring_release; set before registration
  bool registered_ = false;
  // Mirrors of reader-thread state for other threads (ring reclaim).
  std::atomic<uint64_t> ring_held_{0};
  std::atomic<bool> capturing_{false};
  std::atomic<bool> revoke_sent_{false};
  std::atomic<int64_t> last_capture_ms_{0};

  absl::Mutex send_mu_;
  bool send_failed_ ABSL_GUARDED_BY(send_mu_) = false;
  absl::Mutex slot_mu_;
  std::vector<bool> daemon_owns_ ABSL_GUARDED_BY(slot_mu_);
  uint64_t ring_generation_ ABSL_GUARDED_BY(slot_mu_) = 0;  // +1 per ring
  absl::Mutex info_mu_;
  v1::AgentInfo info_ ABSL_GUARDED_BY(info_mu_);

  std::optional<Capture> capture_;
};

namespace {

// Held by a WriteRegion callback: gives the slot back when the sink calls the
// callback, or when the sink drops it without calling (an aborted ingest), so
// an agent never waits forever for a slot. Keeps the ring mapped meanwhile.
class SlotLease {
 public:
  SlotLease(std::weak_ptr<AgentLinkServer::Connection> conn, std::shared_ptr<RingMapping> ring,
            uint64_t generation, uint32_t slot)
      : conn_(std::move(conn)), ring_(std::move(ring)), generation_(generation), slot_(slot) {}
  ~SlotLease() { Release(); }
  void Release();

 private:
  std::weak_ptr<AgentLinkServer::Connection> conn_;
  std::shared_ptr<RingMapping> ring_;
  uint64_t generation_;
  uint32_t slot_;
  std::atomic<bool> released_{false};
};

}  // namespace

void SlotLease::Release() {
  if (released_.exchange(true)) return;
  if (auto conn = conn_.lock()) conn->ReleaseSlot(generation_, slot_);
}

// ---------------------------------------------------------------------------
// Connection: handshake and frame dispatch.

LinkStatus AgentLinkServer::Connection::Handshake() {
  const AgentLinkServerOptions& opt = server_->options_;
  SetRecvTimeout(fd_.get(), opt.hello_timeout);
  (void)SetSendTimeout(fd_.get(), opt.send_timeout_ms);
  LinkResult<Frame> frame = RecvFrame(fd_.get(), opt.limits);
  if (!frame.ok()) return LinkStatus::Error("no Hello: " + frame.error());
  SetRecvTimeout(fd_.get(), absl::ZeroDuration());
  LinkStatus status = DecodeBody(*frame, &hello_);
  if (!status.ok()) return status;
  if (hello_.protocol_version != kProtocolVersion) {
    return LinkStatus::Error("agent speaks protocol " + std::to_string(hello_.protocol_version) +
                             ", daemon " + std::to_string(kProtocolVersion));
  }
  lazy_ring_ = opt.lazy_rings && HasFeature(hello_.features, kFeatureLazyRing);
  release_capable_ = lazy_ring_ && HasFeature(hello_.features, kFeatureRingRelease);
  UniqueFd ring_fd;
  if (!lazy_ring_) {
    LinkResult<UniqueFd> fd = CreateRing(/*may_reclaim=*/false);
    if (!fd.ok()) return LinkStatus::Error("creating ring: " + fd.error());
    ring_fd = std::move(fd).value();
  }
  agent_id_ = RandomId("agt-");
  {
    absl::MutexLock lock(&info_mu_);
    info_ = AgentInfoFromHello(hello_, agent_id_, NowMs());
  }

  WelcomeMsg welcome;
  welcome.agent_id = agent_id_;
  welcome.chunk_size = opt.chunk_size;
  welcome.slot_size = lazy_ring_ ? opt.slot_size : layout_.slot_size;
  welcome.slot_count = lazy_ring_ ? 0 : layout_.slot_count;
  welcome.max_payload = opt.limits.max_payload;
  if (lazy_ring_) welcome.features.push_back(kFeatureLazyRing);
  if (release_capable_) welcome.features.push_back(kFeatureRingRelease);
  welcome.features.push_back(kFeatureDispatchSkipped);
  post_unchanged_ = HasFeature(hello_.features, kFeaturePostUnchanged);
  if (post_unchanged_) welcome.features.push_back(kFeaturePostUnchanged);
  if (HasFeature(hello_.features, kFeatureSubstitution)) {
    welcome.features.push_back(kFeatureSubstitution);
  }
  // Registration and the Welcome's arm snapshot happen under send_mu_, so an
  // Arm() racing with this handshake is either in the snapshot or pushed
  // after the Welcome, never lost and never before it.
  absl::MutexLock send_lock(&send_mu_);
  {
    absl::MutexLock lock(&server_->mu_);
    if (server_->stopping_) return LinkStatus::Error("daemon shutting down");
    for (auto& [id, arm] : server_->arms_) {
      if (ArmFinished(arm.info)) continue;
      if (!MatchesProcess(arm.selector, hello_.pid, hello_.process_name)) continue;
      welcome.arms.push_back(ArmFromSelector(id, arm.selector));
      welcome.arms.back().seq = arm.seq;
    }
    // arms_ is keyed by (random) id: put them back in arming order.
    std::sort(welcome.arms.begin(), welcome.arms.end(),
              [](const ArmMsg& a, const ArmMsg& b) { return a.seq < b.seq; });
    server_->agents_[agent_id_] = shared_from_this();
    registered_ = true;
  }
  int fd = ring_fd.get();
  status = lazy_ring_ ? SendMessage(fd_.get(), welcome)
                      : SendMessage(fd_.get(), welcome, {}, &fd, 1);
  if (!status.ok()) {
    send_failed_ = true;
    return status;
  }
  return LinkStatus::Ok();
}

LinkResult<UniqueFd> AgentLinkServer::Connection::CreateRing(bool may_reclaim) {
  const AgentLinkServerOptions& opt = server_->options_;
  const uint64_t bytes = server_->ChargeRing(this, opt.slot_size, opt.slot_count, may_reclaim);
  if (bytes == 0) {
    return LinkStatus::Error(absl::StrFormat(
        "the --staging-total-gib budget of %d bytes is in use by the rings of captures in "
        "flight (a ring needs at least 2 slots of %d bytes); try again when they finished",
        opt.max_total_ring_bytes, opt.slot_size));
  }
  RingLayout layout{opt.slot_size, static_cast<uint32_t>(bytes / opt.slot_size)};
  absl::Time t0 = absl::Now();
  LinkResult<UniqueFd> ring_fd = CreateRingMemfd(layout, "kerncap-ring");
  if (!ring_fd.ok()) {
    server_->UnchargeRing(bytes);
    return ring_fd.status();
  }
  LinkResult<RingMapping> mapping = RingMapping::Map(ring_fd->get(), layout, false);
  if (!mapping.ok()) {
    server_->UnchargeRing(bytes);
    return mapping.status();
  }
  ring_charged_ = bytes;
  ring_ = std::make_shared<RingMapping>(std::move(mapping).value());
  layout_ = layout;
  {
    absl::MutexLock lock(&slot_mu_);
    daemon_owns_.assign(layout_.slot_count, false);
    ++ring_generation_;
  }
  revoke_sent_ = false;
  ring_held_ = bytes;
  if (layout.slot_count < opt.slot_count) {
    log::Warn("agent_link.ring_reduced",
              {{"agent", agent_id_},
               {"slots", layout.slot_count},
               {"wanted", opt.slot_count},
               {"reason", "--staging-total-gib budget in use by other agents' rings"}});
  }
  log::Info("agent_link.ring_created", {{"agent", agent_id_},
                                        {"bytes", layout.bytes()},
                                        {"slots", layout.slot_count},
                                        {"seconds", absl::ToDoubleSeconds(absl::Now() - t0)}});
  return ring_fd;
}

LinkStatus AgentLinkServer::Connection::OnRingRequest(const Frame& frame) {
  RingRequestMsg msg;
  LinkStatus status = DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  if (!lazy_ring_) return LinkStatus::Error("RingRequest from an agent that has its ring");
  if (ring_ != nullptr) return LinkStatus::Error("RingRequest for a second ring");
  RingGrantMsg grant;
  // "capture": a BeginCapture waits for this ring; "armed": it is wanted
  // ahead of time and gets only what is free.
  LinkResult<UniqueFd> fd = CreateRing(/*may_reclaim=*/msg.reason == RingRequestReason::kCapture);
  if (!fd.ok()) {
    grant.error = fd.error();
    log::Warn("agent_link.ring_failed", {{"agent", agent_id_}, {"error", fd.error()}});
    return Send(grant);
  }
  grant.slot_size = layout_.slot_size;
  grant.slot_count = layout_.slot_count;
  int raw = fd->get();
  return Send(grant, {}, &raw, 1);
}

LinkStatus AgentLinkServer::Connection::OnRingRelease(const Frame& frame) {
  RingReleaseMsg msg;
  LinkStatus status = DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  if (!release_capable_) return LinkStatus::Error("RingRelease without the ring_release feature");
  if (ring_ == nullptr) return LinkStatus::Error("RingRelease without a ring");
  if (capture_.has_value()) {
    return LinkStatus::Error("RingRelease while capture " + std::to_string(capture_->token) +
                             " is in flight");
  }
  {
    absl::MutexLock lock(&slot_mu_);
    daemon_owns_.clear();
    ++ring_generation_;
  }
  // Slot leases still in the store's pipeline keep their own reference to
  // the mapping; the pages go when the last of them does.
  ring_.reset();
  layout_ = {0, 0};
  ring_held_ = 0;
  const uint64_t bytes = ring_charged_;
  ring_charged_ = 0;
  server_->UnchargeRing(bytes);
  log::Info("agent_link.ring_released",
            {{"agent", agent_id_}, {"bytes", bytes}, {"reason", std::string(WireName(msg.reason))}});
  return LinkStatus::Ok();
}

LinkStatus AgentLinkServer::Connection::OnSubstitutionReport(const Frame& frame) {
  if (!HasFeature(hello_.features, kFeatureSubstitution)) {
    return LinkStatus::Error("SubstitutionReport from an agent that did not offer substitution");
  }
  SubstitutionReportMsg msg;
  LinkStatus status = DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  if (msg.state == SubstitutionState::kRefused || msg.state == SubstitutionState::kEnded) {
    log::Info("substitution.agent_" + msg.state, {{"agent", agent_id_},
                                                  {"substitution", msg.sub_id},
                                                  {"variant_launches", msg.variant_launches},
                                                  {"reason", msg.reason}});
  }
  server_->substitutions_.OnReport(agent_id_, msg, NowMs());
  return LinkStatus::Ok();
}

LinkStatus AgentLinkServer::Connection::OnDispatchSkipped(const Frame& frame) {
  DispatchSkippedMsg msg;
  LinkStatus status = DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  std::string reason = absl::StrCat("dispatch ", msg.dispatch_index, " of ", msg.kernel,
                                    " not captured: ", msg.reason);
  if (msg.retried) absl::StrAppend(&reason, " (the arm takes a later matching dispatch)");
  log::Warn("capture.skipped", {{"agent", agent_id_},
                                {"arm", msg.arm_id},
                                {"kernel", msg.kernel},
                                {"dispatch", msg.dispatch_index},
                                {"retried", msg.retried},
                                {"reason", msg.reason}});
  v1::Event event;
  v1::CaptureFailed* f = event.mutable_capture_failed();
  f->set_agent_id(agent_id_);
  f->set_reason(reason);
  f->set_skipped(true);
  f->set_arm_id(msg.arm_id);
  f->set_kernel(msg.kernel);
  f->set_dispatch_index(msg.dispatch_index);
  f->set_retried(msg.retried);
  server_->events_->Publish(std::move(event));
  if (!msg.arm_id.empty()) {
    v1::SkippedDispatch s;
    s.set_agent_id(agent_id_);
    s.set_pid(hello_.pid);
    s.set_kernel(msg.kernel);
    s.set_dispatch_index(msg.dispatch_index);
    s.set_reason(msg.reason);
    s.set_retried(msg.retried);
    s.set_unix_ms(NowMs());
    server_->NoteSkipped(msg.arm_id, std::move(s));
  }
  return LinkStatus::Ok();
}

LinkStatus AgentLinkServer::Connection::ServeFrames() {
  const FrameLimits& limits = server_->options_.limits;
  while (true) {
    bool eof = false;
    LinkResult<Frame> frame = RecvFrame(fd_.get(), limits, &eof);
    if (!frame.ok()) {
      if (eof) return LinkStatus::Ok();
      return frame.status();
    }
    if (!frame->fds.empty()) return LinkStatus::Error("unexpected file descriptors from agent");
    LinkStatus status;
    // Bounds keep allocations small; should one still fail, this agent is
    // dropped (its capture aborted) and kerncapd keeps serving the others.
    try {
    switch (frame->type) {
      case MessageType::kCaptureBegin: status = OnCaptureBegin(*frame); break;
      case MessageType::kRegionBegin: status = OnRegionBegin(*frame); break;
      case MessageType::kSlotFilled: status = OnSlotFilled(*frame); break;
      case MessageType::kChunksUnchanged: status = OnChunksUnchanged(*frame); break;
      case MessageType::kCodeObject: status = OnCodeObject(*frame); break;
      case MessageType::kCaptureEnd: status = OnCaptureEnd(*frame); break;
      case MessageType::kCaptureAbort: status = OnCaptureAbort(*frame); break;
      case MessageType::kRingRequest: status = OnRingRequest(*frame); break;
      case MessageType::kRingRelease: status = OnRingRelease(*frame); break;
      case MessageType::kDispatchSkipped: status = OnDispatchSkipped(*frame); break;
      case MessageType::kSubstitutionReport: status = OnSubstitutionReport(*frame); break;
      case MessageType::kError: {
        ErrorMsg err;
        (void)DecodeBody(*frame, &err);
        log::Warn("agent_link.agent_error", {{"agent", agent_id_}, {"message", err.message}});
        return LinkStatus::Ok();
      }
      default:
        status = LinkStatus::Error(std::string("unexpected ") + MessageTypeName(frame->type) +
                                   " from agent");
    }
    } catch (const std::exception& e) {
      status = LinkStatus::Error(std::string("handling ") + MessageTypeName(frame->type) + ": " +
                                 e.what());
    }
    if (!status.ok()) return status;
  }
}

LinkStatus AgentLinkServer::Connection::CheckToken(uint64_t token, const char* what) {
  if (!capture_.has_value()) {
    return LinkStatus::Error(std::string(what) + " without CaptureBegin");
  }
  if (capture_->token != token) {
    return LinkStatus::Error(std::string(what) + " for token " + std::to_string(token) +
                             ", capture in flight is " + std::to_string(capture_->token));
  }
  return LinkStatus::Ok();
}

void AgentLinkServer::Connection::ReleaseDeclaredChunks() {
  if (!capture_.has_value() || capture_->declared_chunks == 0) return;
  server_->declared_chunks_in_flight_.fetch_sub(capture_->declared_chunks);
  capture_->declared_chunks = 0;
}

void AgentLinkServer::Connection::DropIngest(const std::string& abort_reason) {
  if (!capture_.has_value() || capture_->ingest == nullptr) return;
  if (!abort_reason.empty()) capture_->ingest->Abort(abort_reason);
  capture_->ingest.reset();
  ReleaseDeclaredChunks();
  server_->IngestFinished();
}

void AgentLinkServer::Connection::FailCapture(const std::string& reason) {
  Capture& c = *capture_;
  if (c.failed) return;
  c.failed = true;
  DropIngest(reason);
  if (c.arm_reserved) {
    server_->ReleaseArm(c.arm_id, c.capture_id, /*committed=*/false);
    c.arm_reserved = false;
  }
  log::Warn("capture.failed",
            {{"capture", c.capture_id}, {"agent", agent_id_}, {"reason", reason}});
  v1::Event event;
  v1::CaptureFailed* f = event.mutable_capture_failed();
  f->set_capture_id(c.capture_id);
  f->set_agent_id(agent_id_);
  f->set_reason(reason);
  server_->events_->Publish(std::move(event));
  CaptureResultMsg result;
  result.token = c.token;
  result.error = reason;
  (void)Send(result);
}

LinkStatus AgentLinkServer::Connection::OnCaptureBegin(const Frame& frame) {
  CaptureBeginMsg begin;
  LinkStatus status = DecodeBody(frame, &begin);
  if (!status.ok()) return status;
  if (capture_.has_value()) {
    return LinkStatus::Error("CaptureBegin while capture " + std::to_string(capture_->token) +
                             " is in flight");
  }
  const CaptureLimits& limits = server_->options_.capture_limits;
  capture_.emplace();
  capturing_ = true;
  last_capture_ms_ = NowMs();
  Capture& c = *capture_;
  c.token = begin.token;
  c.capture_id = NewCaptureId();
  c.arm_id = begin.arm_id;
  c.last_progress = absl::Now();
  c.manifest.set_capture_id(c.capture_id);

  if (server_->draining_) {
    FailCapture("daemon is shutting down");
    return LinkStatus::Ok();
  }
  // Everything below is the agent's word: bound it before keeping it.
  if (std::max(begin.mangled_name.size(), begin.demangled_name.size()) >
      limits.max_kernel_name_bytes) {
    FailCapture(absl::StrCat("kernel name of ",
                             std::max(begin.mangled_name.size(), begin.demangled_name.size()),
                             " bytes exceeds the limit of ", limits.max_kernel_name_bytes));
    return LinkStatus::Ok();
  }
  if (frame.payload.size() > limits.max_argument_blob) {
    FailCapture(absl::StrCat("argument blob of ", frame.payload.size(),
                             " bytes exceeds the limit of ", limits.max_argument_blob));
    return LinkStatus::Ok();
  }
  if (absl::Status graph = CheckGraphOrigin(begin); !graph.ok()) {
    FailCapture(absl::StrCat("bad capture from the agent: ", graph.message()));
    return LinkStatus::Ok();
  }
  if (absl::Status tex = CheckTextureObjects(begin, frame.payload); !tex.ok()) {
    FailCapture(absl::StrCat("bad capture from the agent: ", tex.message()));
    return LinkStatus::Ok();
  }
  // Only captures an arm asked for are stored: an agent cannot fill the
  // store on its own.
  if (c.arm_id.empty()) {
    FailCapture(
        "no arm selected this capture: kerncapd stores only dispatches an arm asked for "
        "(kerncapctl arm)");
    return LinkStatus::Ok();
  }
  std::string why = server_->ReserveArm(c.arm_id, hello_, begin);
  if (!why.empty()) {
    FailCapture(why);
    return LinkStatus::Ok();
  }
  c.arm_reserved = true;
  FillManifest(hello_, begin, frame.payload, &c.manifest);
  c.manifest.set_capture_id(c.capture_id);
  c.manifest.set_created_unix_ms(NowMs());
  {
    absl::MutexLock lock(&server_->mu_);
    auto it = server_->arms_.find(c.arm_id);
    if (it != server_->arms_.end()) {
      for (const auto& [k, v] : it->second.info.tags()) (*c.manifest.mutable_tags())[k] = v;
    }
  }
  absl::StatusOr<std::unique_ptr<CaptureIngest>> ingest = server_->sink_->BeginCapture();
  if (!ingest.ok()) {
    FailCapture(absl::StrCat("store refused capture: ", ingest.status().ToString()));
    return LinkStatus::Ok();
  }
  c.ingest = std::move(ingest).value();
  server_->ingests_in_flight_.fetch_add(1);
  log::Info("capture.started", {{"capture", c.capture_id},
                                {"agent", agent_id_},
                                {"kernel", begin.demangled_name},
                                {"arm", c.arm_id}});
  v1::Event event;
  v1::CaptureStarted* s = event.mutable_capture_started();
  s->set_capture_id(c.capture_id);
  s->set_agent_id(agent_id_);
  s->set_kernel(begin.demangled_name.empty() ? begin.mangled_name : begin.demangled_name);
  s->set_arm_id(c.arm_id);
  server_->events_->Publish(std::move(event));
  return LinkStatus::Ok();
}

LinkStatus AgentLinkServer::Connection::OnRegionBegin(const Frame& frame) {
  RegionBeginMsg msg;
  LinkStatus status = DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  status = CheckToken(msg.token, "RegionBegin");
  if (!status.ok()) return status;
  Capture& c = *capture_;
  if (msg.region != c.region_count) {
    return LinkStatus::Error("RegionBegin numbered " + std::to_string(msg.region) + ", expected " +
                             std::to_string(c.region_count));
  }
  const ImageKind image = msg.image;  // a known name: checked when the frame was decoded
  if (image == ImageKind::kPre) {
    if (c.saw_post) return LinkStatus::Error("pre-image region after a post-image region");
  } else {
    c.saw_post = true;
  }
  ++c.region_count;
  if (c.failed) return LinkStatus::Ok();
  const CaptureLimits& limits = server_->options_.capture_limits;
  const uint64_t chunk = server_->options_.chunk_size;
  if (c.region_count > limits.max_regions) {
    FailCapture(absl::StrCat("capture declares more than ", limits.max_regions, " regions"));
    return LinkStatus::Ok();
  }
  if (msg.name.size() > limits.max_name_bytes) {
    FailCapture(absl::StrCat("region ", msg.region, ": name of ", msg.name.size(),
                             " bytes exceeds the limit of ", limits.max_name_bytes));
    return LinkStatus::Ok();
  }
  // Chunks, not bytes, cost the daemon memory; computed without overflow.
  const uint64_t chunks = msg.size / chunk + (msg.size % chunk != 0);
  if (chunks > limits.max_chunks - std::min(limits.max_chunks, c.declared_chunks)) {
    FailCapture(absl::StrFormat(
        "region %d of %d bytes (at va 0x%x) makes the capture declare more than %d chunks of "
        "%d bytes, the limit for one capture",
        msg.region, msg.size, msg.va, limits.max_chunks, chunk));
    return LinkStatus::Ok();
  }
  if (!server_->ChargeDeclaredChunks(chunks)) {
    FailCapture(absl::StrFormat(
        "region %d of %d bytes does not fit: captures in flight already declare %d of the %d "
        "chunks kerncapd ingests at once; try again when they finished",
        msg.region, msg.size, server_->declared_chunks_in_flight_.load(),
        limits.max_inflight_chunks));
    return LinkStatus::Ok();
  }
  c.declared_chunks += chunks;
  v1::Region region;
  region.set_va(msg.va);
  region.set_kind(RegionKindFromWire(msg.kind));
  region.set_device(msg.device);
  region.set_name(msg.name);
  region.mutable_data()->set_size(msg.size);
  region.mutable_data()->set_chunk_size(server_->options_.chunk_size);
  absl::StatusOr<int> handle = c.ingest->AddRegion(image, region);
  if (!handle.ok()) {
    FailCapture(absl::StrCat("adding region: ", handle.status().ToString()));
    return LinkStatus::Ok();
  }
  c.regions.push_back({image, *handle, msg.size});
  c.declared += msg.size;
  return LinkStatus::Ok();
}

LinkStatus AgentLinkServer::Connection::OnSlotFilled(const Frame& frame) {
  SlotFilledMsg msg;
  LinkStatus status = DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  status = CheckToken(msg.token, "SlotFilled");
  if (!status.ok()) return status;
  Capture& c = *capture_;
  if (msg.slot >= layout_.slot_count) {
    return LinkStatus::Error("slot " + std::to_string(msg.slot) + " out of range");
  }
  if (msg.region >= c.region_count) {
    return LinkStatus::Error("SlotFilled for undeclared region " + std::to_string(msg.region));
  }
  if (msg.length == 0 || msg.length > layout_.slot_size) {
    return LinkStatus::Error("slot length " + std::to_string(msg.length) + " invalid");
  }
  {
    absl::MutexLock lock(&slot_mu_);
    if (daemon_owns_[msg.slot]) {
      return LinkStatus::Error("slot " + std::to_string(msg.slot) +
                               " filled while the daemon still holds it");
    }
  }
  if (c.failed) {
    // Nothing of a failed capture is kept: hand the slot straight back.
    SlotFreeMsg free;
    free.slot = msg.slot;
    return Send(free);
  }
  const RegionState& region = c.regions[msg.region];
  const uint64_t chunk = server_->options_.chunk_size;
  if (msg.offset > region.size || msg.length > region.size - msg.offset) {
    return LinkStatus::Error("write [" + std::to_string(msg.offset) + ", +" +
                             std::to_string(msg.length) + ") overflows region " +
                             std::to_string(msg.region) + " of " + std::to_string(region.size) +
                             " bytes");
  }
  if (msg.offset % chunk != 0 ||
      (msg.length % chunk != 0 && msg.offset + msg.length != region.size)) {
    return LinkStatus::Error("write [" + std::to_string(msg.offset) + ", +" +
                             std::to_string(msg.length) + ") not aligned to chunk size " +
                             std::to_string(chunk));
  }
  uint64_t generation;
  {
    absl::MutexLock lock(&slot_mu_);
    daemon_owns_[msg.slot] = true;
    generation = ring_generation_;
  }
  auto lease = std::make_shared<SlotLease>(weak_from_this(), ring_, generation, msg.slot);
  absl::Status write = c.ingest->WriteRegion(region.handle, msg.offset, ring_->slot(msg.slot),
                                             msg.length, [lease]() { lease->Release(); });
  if (!write.ok()) {
    lease->Release();
    FailCapture(absl::StrCat("writing region: ", write.ToString()));
    return LinkStatus::Ok();
  }
  c.received += msg.length;
  PublishProgress(false);
  return LinkStatus::Ok();
}

LinkStatus AgentLinkServer::Connection::OnChunksUnchanged(const Frame& frame) {
  if (!post_unchanged_) {
    return LinkStatus::Error("ChunksUnchanged from an agent that did not announce post_unchanged");
  }
  ChunksUnchangedMsg msg;
  LinkStatus status = DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  status = CheckToken(msg.token, "ChunksUnchanged");
  if (!status.ok()) return status;
  Capture& c = *capture_;
  if (msg.region >= c.region_count) {
    return LinkStatus::Error("ChunksUnchanged for undeclared region " +
                             std::to_string(msg.region));
  }
  if (c.failed) return LinkStatus::Ok();
  const RegionState& region = c.regions[msg.region];
  // The ingest checks the rest (a post region, a pre region of the same size
  // at its va, the range, nothing twice) and takes the digests of the bytes
  // it hashed itself for that pre region.
  absl::Status mark = c.ingest->MarkUnchanged(region.handle, msg.first_chunk, msg.chunk_count);
  if (!mark.ok()) {
    FailCapture(absl::StrCat("unchanged chunks of region ", msg.region, ": ", mark.ToString()));
    return LinkStatus::Ok();
  }
  const uint64_t chunk = server_->options_.chunk_size;
  const uint64_t begin = msg.first_chunk * chunk;
  c.received += std::min(region.size, begin + msg.chunk_count * chunk) - begin;
  PublishProgress(false);
  return LinkStatus::Ok();
}

void AgentLinkServer::Connection::PublishProgress(bool force) {
  Capture& c = *capture_;
  absl::Time now = absl::Now();
  if (!force && now - c.last_progress < server_->options_.progress_interval) return;
  c.last_progress = now;
  v1::Event event;
  v1::CaptureProgress* p = event.mutable_capture_progress();
  p->set_capture_id(c.capture_id);
  p->set_done_bytes(c.received);
  p->set_total_bytes(c.declared);
  server_->events_->Publish(std::move(event));
}

LinkStatus AgentLinkServer::Connection::OnCodeObject(const Frame& frame) {
  CodeObjectMsg msg;
  LinkStatus status = DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  status = CheckToken(msg.token, "CodeObject");
  if (!status.ok()) return status;
  Capture& c = *capture_;
  if (c.failed) return LinkStatus::Ok();
  const CaptureLimits& limits = server_->options_.capture_limits;
  if (++c.code_objects > limits.max_code_objects) {
    FailCapture(absl::StrCat("capture sends more than ", limits.max_code_objects,
                             " code objects"));
    return LinkStatus::Ok();
  }
  c.code_object_bytes += frame.payload.size();
  if (c.code_object_bytes > limits.max_code_object_bytes) {
    FailCapture(absl::StrCat("capture sends more than ", limits.max_code_object_bytes,
                             " bytes of code objects"));
    return LinkStatus::Ok();
  }
  if (msg.name.size() > limits.max_name_bytes) {
    FailCapture(absl::StrCat("code object name of ", msg.name.size(),
                             " bytes exceeds the limit of ", limits.max_name_bytes));
    return LinkStatus::Ok();
  }
  v1::CodeObject meta;
  meta.set_format(CodeObjectFormatFromWire(msg.format));
  meta.set_name(msg.name);
  absl::Status add = c.ingest->AddCodeObject(meta, frame.payload.data(), frame.payload.size());
  if (!add.ok()) FailCapture(absl::StrCat("adding code object: ", add.ToString()));
  return LinkStatus::Ok();
}

LinkStatus AgentLinkServer::Connection::OnCaptureEnd(const Frame& frame) {
  CaptureEndMsg msg;
  LinkStatus status = DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  status = CheckToken(msg.token, "CaptureEnd");
  if (!status.ok()) return status;
  Capture& c = *capture_;
  if (!c.failed) {
    PublishProgress(true);
    c.manifest.set_post_complete(msg.post_complete);
    if (msg.timing.path != CapturePath::kUnspecified) {
      v1::CaptureTiming* t = c.manifest.mutable_agent_timing();
      t->set_path(std::string(WireName(msg.timing.path)));
      t->set_path_reason(msg.timing.path_reason.substr(0, 512));
      t->set_quiesce_seconds(msg.timing.quiesce_seconds);
      t->set_pre_seconds(msg.timing.pre_seconds);
      t->set_post_seconds(msg.timing.post_seconds);
      t->set_held_seconds(msg.timing.held_seconds);
      t->set_drain_seconds(msg.timing.drain_seconds);
      t->set_pcie_bytes(msg.timing.pcie_bytes);
      t->set_unchanged_post_bytes(msg.timing.unchanged_post_bytes);
    }
    v1::CaptureManifest manifest = c.manifest;
    absl::StatusOr<std::string> id = c.ingest->Commit(std::move(manifest));
    if (!id.ok()) {
      FailCapture(absl::StrCat("commit: ", id.status().ToString()));
    } else {
      c.ingest.reset();
      ReleaseDeclaredChunks();
      server_->IngestFinished();
      {
        absl::MutexLock lock(&info_mu_);
        info_.set_captures(info_.captures() + 1);
      }
      log::Info("capture.committed",
                {{"capture", *id}, {"agent", agent_id_}, {"bytes", c.received}});
      v1::Event event;
      v1::CaptureSummary* s = event.mutable_capture_committed();
      const v1::CaptureManifest& m = c.manifest;
      s->set_capture_id(*id);
      s->set_created_unix_ms(m.created_unix_ms());
      s->set_kernel(m.kernel().demangled_name());
      s->set_mangled_name(m.kernel().mangled_name());
      s->set_platform(m.kernel().platform());
      s->set_pid(m.process().pid());
      s->set_hostname(m.process().hostname());
      s->set_process_name(m.process().process_name());
      s->set_device(m.device().name());
      uint32_t pre_regions = 0;
      for (const RegionState& r : c.regions) pre_regions += r.image == ImageKind::kPre;
      s->set_regions(pre_regions);
      s->set_logical_bytes(c.declared);
      s->set_source(v1::SOURCE_AGENT);
      *s->mutable_tags() = m.tags();
      server_->events_->Publish(std::move(event));
      // After capture_committed, so watchers see the capture before the arm
      // that it completed turns DONE.
      if (c.arm_reserved) {
        server_->ReleaseArm(c.arm_id, *id, /*committed=*/true);
        c.arm_reserved = false;
      }
      CaptureResultMsg result;
      result.token = c.token;
      result.capture_id = *id;
      (void)Send(result);
    }
  }
  capture_.reset();
  capturing_ = false;
  return LinkStatus::Ok();
}

LinkStatus AgentLinkServer::Connection::OnCaptureAbort(const Frame& frame) {
  CaptureAbortMsg msg;
  LinkStatus status = DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  status = CheckToken(msg.token, "CaptureAbort");
  if (!status.ok()) return status;
  if (!capture_->failed) FailCapture("aborted by agent: " + msg.reason);
  capture_.reset();
  capturing_ = false;
  return LinkStatus::Ok();
}

void AgentLinkServer::Connection::Cleanup(const std::string& reason) {
  if (capture_.has_value() && !capture_->failed) {
    Capture& c = *capture_;
    c.failed = true;
    const std::string why =
        reason.empty() ? std::string("agent disconnected") : "agent disconnected: " + reason;
    DropIngest(why);
    if (c.arm_reserved) server_->ReleaseArm(c.arm_id, c.capture_id, false);
    log::Warn("capture.failed", {{"capture", c.capture_id}, {"agent", agent_id_}, {"reason", why}});
    v1::Event event;
    v1::CaptureFailed* f = event.mutable_capture_failed();
    f->set_capture_id(c.capture_id);
    f->set_agent_id(agent_id_);
    f->set_reason(why);
    server_->events_->Publish(std::move(event));
  }
  ReleaseDeclaredChunks();
  capture_.reset();
  capturing_ = false;
  Kick();
}

// ---------------------------------------------------------------------------
// Server.

AgentLinkServer::AgentLinkServer() = default;

AgentLinkServer::~AgentLinkServer() { Shutdown(/*discard_in_flight=*/true); }

absl::Status AgentLinkServer::Start(const AgentLinkServerOptions& options, CaptureSink& sink,
                                    EventBus& events) {
  {
    absl::MutexLock lock(&mu_);
    if (started_) return absl::FailedPreconditionError("agent link server already started");
  }
  if (options.socket_path.empty()) return absl::InvalidArgumentError("agent socket path empty");
  RingLayout layout{options.slot_size, options.slot_count};
  std::string bad = ValidateRingLayout(layout, options.chunk_size);
  if (!bad.empty()) return absl::InvalidArgumentError(bad);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (options.socket_path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("agent socket path too long: ", options.socket_path));
  }
  memcpy(addr.sun_path, options.socket_path.data(), options.socket_path.size());
  // The socket folder is 0750 like the control socket's (kerncapd shares
  // it): created so, and tightened if this server created it.
  {
    const std::string dir = DirName(options.socket_path);
    struct stat dir_st;
    const bool existed = ::stat(dir.c_str(), &dir_st) == 0;
    KC_RETURN_IF_ERROR(MakeDirs(dir, 0750));
    if (!existed && ::chmod(dir.c_str(), 0750) != 0) {
      return ErrnoError(errno, absl::StrCat("chmod ", dir));
    }
  }

  struct stat st;
  if (::lstat(options.socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(options.socket_path, " exists and is not a socket"));
    }
    LinkResult<UniqueFd> probe = ConnectUnix(options.socket_path);
    if (probe.ok()) {
      return absl::AlreadyExistsError(
          absl::StrCat("another daemon is serving agents on ", options.socket_path));
    }
    // Nobody listens: a dead daemon's leftover.
    log::Info("agent_link.stale_socket", {{"path", options.socket_path}});
    if (::unlink(options.socket_path.c_str()) != 0 && errno != ENOENT) {
      return ErrnoError(errno, absl::StrCat("unlink ", options.socket_path));
    }
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoError(errno, "socket");
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return ErrnoError(errno, absl::StrCat("bind ", options.socket_path));
  }
  if (::chmod(options.socket_path.c_str(), options.socket_mode) != 0 ||
      ::lstat(options.socket_path.c_str(), &st) != 0) {
    int err = errno;
    ::unlink(options.socket_path.c_str());
    return ErrnoError(err, absl::StrCat("chmod ", options.socket_path));
  }
  if (::listen(fd.get(), 128) != 0) {
    int err = errno;
    ::unlink(options.socket_path.c_str());
    return ErrnoError(err, "listen");
  }
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) return ErrnoError(errno, "eventfd");

  options_ = options;
  sink_ = &sink;
  events_ = &events;
  listen_fd_ = std::move(fd);
  wake_fd_ = std::move(wake);
  socket_dev_ = st.st_dev;
  socket_ino_ = st.st_ino;
  {
    absl::MutexLock lock(&mu_);
    started_ = true;
  }
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  log::Info("agent_link.listening", {{"path", options_.socket_path},
                                     {"slot_size", options_.slot_size},
                                     {"slot_count", options_.slot_count}});
  return absl::OkStatus();
}

void AgentLinkServer::Wake() {
  uint64_t one = 1;
  if (wake_fd_.valid()) (void)!::write(wake_fd_.get(), &one, sizeof(one));
}

void AgentLinkServer::AcceptLoop() {
  while (!stopping_) {
    int timeout_ms = 1000;
    {
      absl::MutexLock lock(&mu_);
      int64_t now = NowMs();
      for (const auto& [id, arm] : arms_) {
        if (ArmFinished(arm.info) || arm.info.expires_unix_ms() == 0) continue;
        int64_t left = std::max<int64_t>(0, arm.info.expires_unix_ms() - now);
        timeout_ms = static_cast<int>(std::min<int64_t>(timeout_ms, left + 1));
      }
    }
    pollfd fds[2] = {{listen_fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
    int n = ::poll(fds, 2, timeout_ms);
    if (n < 0 && errno != EINTR) {
      log::Error("agent_link.poll_failed", {{"error", strerror(errno)}});
      break;
    }
    if (fds[1].revents & POLLIN) {
      uint64_t v;
      (void)!::read(wake_fd_.get(), &v, sizeof(v));
    }
    ExpireArms();
    ReapFinished();
    if (stopping_) break;
    if (n <= 0 || !(fds[0].revents & POLLIN)) continue;
    UniqueFd client(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!client.valid()) continue;
    auto conn = std::make_shared<Connection>(this, std::move(client));
    absl::MutexLock lock(&mu_);
    if (static_cast<int>(all_connections_.size()) >= options_.max_agents) {
      log::Warn("agent_link.refused", {{"reason", "too many agents"}});
      ErrorMsg err;
      err.message = "too many agents connected";
      (void)SetSendTimeout(conn->fd_.get(), 100);
      (void)conn->Send(err);
      continue;
    }
    all_connections_.push_back(conn);
    conn->thread_ = std::thread([this, conn] { Serve(conn); });
  }
}

void AgentLinkServer::Serve(std::shared_ptr<Connection> conn) {
  LinkStatus status = conn->Handshake();
  if (status.ok()) {
    v1::Event joined;
    *joined.mutable_agent_joined() = conn->info();
    events_->Publish(std::move(joined));
    log::Info("agent_link.joined", {{"agent", conn->agent_id()},
                                    {"pid", conn->hello_.pid},
                                    {"process", conn->hello_.process_name}});
    status = conn->ServeFrames();
  }
  if (!status.ok() && !stopping_) {
    log::Warn("agent_link.disconnect",
              {{"agent", conn->agent_id()}, {"reason", status.message()}});
    ErrorMsg err;
    err.message = status.message();
    (void)conn->Send(err);
  }
  conn->Cleanup(status.ok() ? std::string() : status.message());
  bool was_registered = conn->registered_;
  {
    absl::MutexLock lock(&mu_);
    if (was_registered) agents_.erase(conn->agent_id());
    finished_.push_back(conn);
  }
  if (was_registered) {
    substitutions_.OnAgentGone(conn->agent_id(), NowMs());
    v1::Event left;
    *left.mutable_agent_left() = conn->info();
    events_->Publish(std::move(left));
    log::Info("agent_link.left", {{"agent", conn->agent_id()}});
  }
  Wake();
}

void AgentLinkServer::ServeForTesting(UniqueFd fd) {
  auto conn = std::make_shared<Connection>(this, std::move(fd));
  {
    absl::MutexLock lock(&mu_);
    all_connections_.push_back(conn);
  }
  Serve(conn);  // ends by queueing it for ReapFinished (no thread to join)
}

void AgentLinkServer::ReapFinished() {
  std::vector<std::shared_ptr<Connection>> done;
  {
    absl::MutexLock lock(&mu_);
    done.swap(finished_);
    for (const auto& c : done) {
      all_connections_.erase(std::remove(all_connections_.begin(), all_connections_.end(), c),
                             all_connections_.end());
    }
  }
  for (auto& c : done) {
    if (c->thread_.joinable()) c->thread_.join();
  }
}

void AgentLinkServer::IngestFinished() {
  absl::MutexLock lock(&mu_);  // Shutdown awaits the counter under mu_
  ingests_in_flight_.fetch_sub(1);
}

void AgentLinkServer::Shutdown(bool discard_in_flight) {
  {
    absl::MutexLock lock(&mu_);
    if (!started_ || shut_down_) return;
    shut_down_ = true;
  }
  draining_ = true;
  if (!discard_in_flight) {
    absl::MutexLock lock(&mu_);
    auto idle = [this]() { return ingests_in_flight_.load() == 0; };
    mu_.AwaitWithTimeout(absl::Condition(&idle), options_.drain_timeout);
  }
  stopping_ = true;
  Wake();
  if (accept_thread_.joinable()) accept_thread_.join();
  // Unlink only our own socket file (a newer daemon may already own the path).
  struct stat st;
  if (::lstat(options_.socket_path.c_str(), &st) == 0 && st.st_dev == socket_dev_ &&
      st.st_ino == socket_ino_) {
    ::unlink(options_.socket_path.c_str());
  }
  listen_fd_.reset();
  std::vector<std::shared_ptr<Connection>> conns;
  {
    absl::MutexLock lock(&mu_);
    conns = all_connections_;
  }
  for (auto& c : conns) c->Kick();
  for (auto& c : conns) {
    if (c->thread_.joinable()) c->thread_.join();
  }
  absl::MutexLock lock(&mu_);
  all_connections_.clear();
  finished_.clear();
  agents_.clear();
}

std::vector<std::shared_ptr<AgentLinkServer::Connection>> AgentLinkServer::ConnectionsSnapshot() {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Connection>> out;
  out.reserve(agents_.size());
  for (auto& [id, c] : agents_) out.push_back(c);
  return out;
}

std::vector<v1::AgentInfo> AgentLinkServer::ListAgents() {
  std::vector<v1::AgentInfo> out;
  for (auto& c : ConnectionsSnapshot()) out.push_back(c->info());
  return out;
}

int AgentLinkServer::IngestsInFlight() { return ingests_in_flight_.load(); }

absl::StatusOr<v1::SubstitutionInfo> AgentLinkServer::Substitute(
    const v1::SubstituteRequest& request) {
  const v1::Selector& sel = request.selector();
  if (sel.kernel().empty()) {
    return absl::InvalidArgumentError("selector.kernel: a substitution names its kernel");
  }
  if (sel.skip() != 0 || sel.nth() != 0 || sel.count() != 0) {
    return absl::InvalidArgumentError(
        "selector.skip/nth/count do not apply to a substitution (use SubstituteRequest.count)");
  }
  CodeObjectFormat format = CodeObjectFormat::kUnspecified;
  if (!ParseWireName(request.format(), &format) ||
      (format != CodeObjectFormat::kCubin && format != CodeObjectFormat::kFatbin &&
       format != CodeObjectFormat::kPtx)) {
    return absl::InvalidArgumentError("format must be cubin, fatbin or ptx, not '" +
                                      request.format().substr(0, 64) + "'");
  }
  if (request.code_object().empty()) return absl::InvalidArgumentError("code_object is empty");
  if (request.code_object().size() > kMaxSubstituteCodeObjectBytes) {
    return absl::InvalidArgumentError(absl::StrCat("code_object has ", request.code_object().size(),
                                                   " bytes, more than the ",
                                                   kMaxSubstituteCodeObjectBytes, " allowed"));
  }
  if (request.name().size() > options_.capture_limits.max_name_bytes ||
      request.preflight().size() > 64 * 1024) {
    return absl::InvalidArgumentError("name or preflight too long");
  }
  Selector selector = SelectorFromProto(sel, 0);
  std::string bad = ValidateSelector(selector);
  if (!bad.empty()) return absl::InvalidArgumentError(bad);
  LinkResult<NameMatcher> matcher = NameMatcher::Compile(selector.kernel, selector.match);
  if (!matcher.ok()) return absl::InvalidArgumentError("selector.kernel: " + matcher.error());

  v1::SubstitutionInfo info;
  info.set_substitution_id(RandomId("sub-"));
  *info.mutable_selector() = sel;
  info.set_created_unix_ms(NowMs());
  info.set_count(request.count());
  info.set_ttl_ms(request.ttl_ms());
  info.set_ab(request.ab());
  info.set_name(request.name());
  info.set_format(std::string(WireName(format)));
  info.set_code_object_bytes(request.code_object().size());
  info.set_preflight(request.preflight());

  SubstituteMsg push;
  push.sub_id = info.substitution_id();
  push.kernel = selector.kernel;
  push.match = selector.match;
  push.pid = selector.pid;
  push.process_name = selector.process_name;
  push.device = selector.device;
  push.count = request.count();
  push.ttl_ms = request.ttl_ms();
  push.ab = request.ab();
  push.format = format;
  push.name = request.name();

  std::vector<std::shared_ptr<Connection>> targets;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_ || !started_) return absl::UnavailableError("agent link is not serving");
    for (auto& [id, c] : agents_) {
      if (!HasFeature(c->hello_.features, kFeatureSubstitution)) continue;
      if (MatchesProcess(selector, c->hello_.pid, c->hello_.process_name)) targets.push_back(c);
    }
  }
  if (targets.empty()) {
    return absl::FailedPreconditionError(
        "no connected agent matches the selector's process and offers substitution");
  }
  // Recorded before the push, so a report that comes back at once finds it.
  std::vector<v1::SubstitutionAgentResult> results;
  for (auto& c : targets) {
    v1::SubstitutionAgentResult r;
    r.set_agent_id(c->agent_id());
    r.set_pid(c->hello_.pid);
    r.set_process_name(c->hello_.process_name);
    r.set_state(SubstitutionState::kPending);
    r.set_updated_unix_ms(NowMs());
    results.push_back(std::move(r));
  }
  substitutions_.Add(info, results);
  size_t sent = 0;
  for (auto& c : targets) {
    LinkStatus st = c->Send(push, request.code_object());
    if (st.ok()) {
      ++sent;
    } else {
      SubstitutionReportMsg failed;
      failed.sub_id = push.sub_id;
      failed.state = SubstitutionState::kRefused;
      failed.reason = "sending the code object to the agent failed: " + st.message();
      substitutions_.OnReport(c->agent_id(), failed, NowMs());
    }
  }
  log::Info("substitution.created", {{"substitution", push.sub_id},
                                     {"kernel", selector.kernel},
                                     {"code_object", request.name()},
                                     {"bytes", request.code_object().size()},
                                     {"ab", request.ab()},
                                     {"agents", sent}});
  std::optional<v1::SubstitutionInfo> now = substitutions_.Get(push.sub_id);
  return now ? *now : info;
}

absl::StatusOr<v1::SubstitutionInfo> AgentLinkServer::Unsubstitute(const std::string& id) {
  std::optional<std::vector<std::string>> holders =
      substitutions_.End(id, "unsubstituted", NowMs());
  if (!holders) return absl::NotFoundError("no substitution " + id);
  UnsubstituteMsg msg;
  msg.sub_id = id;
  msg.reason = UnsubstituteReason::kUnsubstituted;
  std::vector<std::shared_ptr<Connection>> targets;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& agent : *holders) {
      auto it = agents_.find(agent);
      if (it != agents_.end()) targets.push_back(it->second);
    }
  }
  for (auto& c : targets) (void)c->Send(msg);
  log::Info("substitution.ended", {{"substitution", id}, {"agents", targets.size()}});
  std::optional<v1::SubstitutionInfo> info = substitutions_.Get(id);
  if (!info) return absl::NotFoundError("no substitution " + id);
  return *info;
}

std::vector<v1::SubstitutionInfo> AgentLinkServer::ListSubstitutions(bool include_finished) {
  return substitutions_.List(include_finished);
}

absl::StatusOr<v1::ArmInfo> AgentLinkServer::Arm(const v1::ArmRequest& request) {
  int64_t now = NowMs();
  int64_t expires = request.expires_unix_ms();
  if (expires == 0 && request.ttl_ms() > 0) {
    expires = now + static_cast<int64_t>(std::min<uint64_t>(request.ttl_ms(), 1ull << 50));
  }
  if (request.expires_unix_ms() < 0) {
    return absl::InvalidArgumentError("expires_unix_ms must not be negative");
  }
  if (expires != 0 && expires <= now) {
    return absl::InvalidArgumentError("arm would already be expired (expires_unix_ms in the past)");
  }
  Selector selector = SelectorFromProto(request.selector(), expires);
  std::string bad = ValidateSelector(selector);
  if (!bad.empty()) return absl::InvalidArgumentError(bad);

  LinkResult<NameMatcher> matcher = NameMatcher::Compile(selector.kernel, selector.match);
  if (!matcher.ok()) return absl::InvalidArgumentError("selector.kernel: " + matcher.error());
  ArmEntry entry;
  entry.selector = selector;
  entry.matcher = std::make_shared<NameMatcher>(std::move(matcher).value());
  v1::ArmInfo& info = entry.info;
  info.set_arm_id(RandomId("arm-"));
  *info.mutable_selector() = request.selector();
  info.set_state(v1::ARM_ACTIVE);
  info.set_created_unix_ms(now);
  info.set_expires_unix_ms(expires);
  *info.mutable_tags() = request.tags();
  ArmMsg push = ArmFromSelector(info.arm_id(), selector);
  std::vector<std::shared_ptr<Connection>> targets;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_ || !started_) return absl::UnavailableError("agent link is not serving");
    entry.seq = next_arm_seq_++;
    push.seq = entry.seq;
    arms_[info.arm_id()] = entry;
    for (auto& [id, c] : agents_) {
      if (MatchesProcess(selector, c->hello_.pid, c->hello_.process_name)) targets.push_back(c);
    }
  }
  for (auto& c : targets) (void)c->Send(push);
  log::Info("arm.created", {{"arm", info.arm_id()},
                            {"kernel", selector.kernel},
                            {"agents", targets.size()}});
  v1::Event event;
  *event.mutable_arm_changed() = info;
  events_->Publish(std::move(event));
  Wake();  // the accept loop tracks expiry deadlines
  return info;
}

void AgentLinkServer::FinishArmLocked(ArmEntry& arm, v1::ArmState state,
                                      std::vector<std::pair<DisarmReason, v1::ArmInfo>>* out) {
  arm.info.set_state(state);
  finished_arm_order_.push_back(arm.info.arm_id());
  out->emplace_back(DisarmReasonFor(state), arm.info);
}

void AgentLinkServer::TrimFinishedArmsLocked() {
  while (finished_arm_order_.size() > options_.max_finished_arms) {
    auto it = arms_.find(finished_arm_order_.front());
    // An arm with captures still committing stays until they settle.
    if (it != arms_.end() && it->second.pending > 0) break;
    if (it != arms_.end()) arms_.erase(it);
    finished_arm_order_.erase(finished_arm_order_.begin());
  }
}

void AgentLinkServer::PushDisarms(
    const std::vector<std::pair<DisarmReason, v1::ArmInfo>>& finished) {
  if (finished.empty()) return;
  auto conns = ConnectionsSnapshot();
  for (const auto& [reason, info] : finished) {
    DisarmMsg msg;
    msg.arm_id = info.arm_id();
    msg.reason = reason;
    for (auto& c : conns) (void)c->Send(msg);
    log::Info("arm.finished", {{"arm", info.arm_id()}, {"reason", std::string(WireName(reason))}});
    v1::Event event;
    *event.mutable_arm_changed() = info;
    events_->Publish(std::move(event));
  }
}

absl::StatusOr<std::vector<v1::ArmInfo>> AgentLinkServer::Disarm(
    const v1::DisarmRequest& request) {
  if (request.arm_id().empty() && !request.all()) {
    return absl::InvalidArgumentError("disarm needs arm_id or all");
  }
  std::vector<std::pair<DisarmReason, v1::ArmInfo>> finished;
  std::vector<v1::ArmInfo> out;
  {
    absl::MutexLock lock(&mu_);
    if (!request.all()) {
      auto it = arms_.find(request.arm_id());
      if (it == arms_.end()) {
        return absl::NotFoundError(absl::StrCat("no arm ", request.arm_id()));
      }
      if (!ArmFinished(it->second.info)) {
        FinishArmLocked(it->second, v1::ARM_DISARMED, &finished);
      }
      out.push_back(it->second.info);
    } else {
      for (auto& [id, arm] : arms_) {
        if (ArmFinished(arm.info)) continue;
        FinishArmLocked(arm, v1::ARM_DISARMED, &finished);
        out.push_back(arm.info);
      }
    }
    TrimFinishedArmsLocked();
  }
  PushDisarms(finished);
  return out;
}

std::vector<v1::ArmInfo> AgentLinkServer::ListArms(bool include_finished) {
  absl::MutexLock lock(&mu_);
  std::vector<const ArmEntry*> entries;
  for (const auto& [id, arm] : arms_) {
    if (include_finished || !ArmFinished(arm.info)) entries.push_back(&arm);
  }
  std::sort(entries.begin(), entries.end(),
            [](const ArmEntry* a, const ArmEntry* b) { return a->seq < b->seq; });
  std::vector<v1::ArmInfo> out;
  out.reserve(entries.size());
  for (const ArmEntry* e : entries) out.push_back(e->info);
  return out;
}

void AgentLinkServer::ExpireArms() {
  std::vector<std::pair<DisarmReason, v1::ArmInfo>> finished;
  {
    absl::MutexLock lock(&mu_);
    int64_t now = NowMs();
    for (auto& [id, arm] : arms_) {
      if (ArmFinished(arm.info)) continue;
      if (IsExpired(arm.selector, now)) FinishArmLocked(arm, v1::ARM_EXPIRED, &finished);
    }
    TrimFinishedArmsLocked();
  }
  PushDisarms(finished);
}

uint64_t AgentLinkServer::RingBytesInUse() {
  absl::MutexLock lock(&budget_mu_);
  return ring_bytes_in_use_;
}

void AgentLinkServer::UnchargeRing(uint64_t bytes) {
  absl::MutexLock lock(&budget_mu_);
  ring_bytes_in_use_ -= std::min(ring_bytes_in_use_, bytes);
}

uint64_t AgentLinkServer::ChargeRing(Connection* requester, uint64_t slot_size,
                                     uint32_t slot_count, bool may_reclaim) {
  const uint64_t want = slot_size * slot_count;
  const uint64_t budget = options_.max_total_ring_bytes;
  absl::MutexLock lock(&budget_mu_);
  if (budget == 0) {
    ring_bytes_in_use_ += want;
    return want;
  }
  auto left = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(budget_mu_) {
    return budget > ring_bytes_in_use_ ? budget - ring_bytes_in_use_ : 0;
  };
  // The largest ring of 2..slot_count slots that fits, or 0.
  auto take = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(budget_mu_) -> uint64_t {
    const uint64_t bytes = std::min<uint64_t>(slot_count, left() / slot_size) * slot_size;
    if (bytes < 2 * slot_size) return 0;
    ring_bytes_in_use_ += bytes;
    return bytes;
  };
  if (left() >= want || !may_reclaim) return take();
  // A capture needs staging the budget does not have: idle rings of other
  // agents (armed, not capturing) go back first.
  budget_mu_.Unlock();
  const uint64_t asked = RevokeIdleRings(requester, want - left());
  budget_mu_.Lock();
  if (asked > 0) {
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(budget_mu_) { return left() >= want; };
    budget_mu_.AwaitWithTimeout(absl::Condition(&enough), options_.ring_reclaim_timeout);
  }
  return take();
}

uint64_t AgentLinkServer::RevokeIdleRings(Connection* requester, uint64_t bytes) {
  std::vector<std::shared_ptr<Connection>> idle;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, c] : agents_) {
      if (c.get() != requester && c->CanBeAskedForRing()) idle.push_back(c);
    }
  }
  std::sort(idle.begin(), idle.end(), [](const auto& a, const auto& b) {
    return a->last_capture_ms() < b->last_capture_ms();
  });
  uint64_t asked = 0;
  for (auto& c : idle) {
    if (asked >= bytes) break;
    asked += c->ring_held();
    c->Revoke("another agent's capture needs staging");
    log::Info("agent_link.ring_revoked", {{"agent", c->agent_id()}, {"bytes", c->ring_held()}});
  }
  return asked;
}

std::string AgentLinkServer::ReserveArm(const std::string& arm_id, const HelloMsg& hello,
                                        const CaptureBeginMsg& begin) {
  absl::MutexLock lock(&mu_);
  auto it = arms_.find(arm_id);
  if (it == arms_.end()) return "unknown arm " + arm_id;
  ArmEntry& arm = it->second;
  if (ArmFinished(arm.info) || IsExpired(arm.selector, NowMs())) {
    return "arm " + arm_id + " is no longer active";
  }
  if (!MatchesProcess(arm.selector, hello.pid, hello.process_name)) {
    return "arm " + arm_id + " does not apply to this process";
  }
  if (!MatchesDevice(arm.selector, static_cast<int32_t>(begin.device))) {
    return absl::StrCat("arm ", arm_id, " does not select device ", begin.device);
  }
  if (arm.matcher == nullptr || !arm.matcher->Matches(begin.demangled_name, begin.mangled_name)) {
    return absl::StrCat("arm ", arm_id, " does not select kernel ",
                        begin.demangled_name.empty() ? begin.mangled_name : begin.demangled_name);
  }
  if (arm.info.captured() + arm.pending >= EffectiveCount(arm.selector)) {
    return "arm " + arm_id + " already has its captures";
  }
  ++arm.pending;
  return "";
}

void AgentLinkServer::NoteSkipped(const std::string& arm_id, v1::SkippedDispatch skipped) {
  constexpr int kMaxSkipsKept = 16;
  v1::ArmInfo changed;
  {
    absl::MutexLock lock(&mu_);
    auto it = arms_.find(arm_id);
    if (it == arms_.end()) return;
    v1::ArmInfo& info = it->second.info;
    // Bounded whatever an agent sends: the oldest entries go.
    if (info.skipped_size() >= kMaxSkipsKept) {
      info.mutable_skipped()->DeleteSubrange(0, info.skipped_size() - kMaxSkipsKept + 1);
    }
    *info.add_skipped() = std::move(skipped);
    info.set_skipped_count(info.skipped_count() + 1);
    changed = info;
  }
  v1::Event event;
  *event.mutable_arm_changed() = std::move(changed);
  events_->Publish(std::move(event));
}

bool AgentLinkServer::ChargeDeclaredChunks(uint64_t chunks) {
  const uint64_t max = options_.capture_limits.max_inflight_chunks;
  uint64_t now = declared_chunks_in_flight_.load();
  do {
    if (chunks > max || now > max - chunks) return false;
  } while (!declared_chunks_in_flight_.compare_exchange_weak(now, now + chunks));
  return true;
}

void AgentLinkServer::ReleaseArm(const std::string& arm_id, const std::string& capture_id,
                                 bool committed) {
  std::vector<std::pair<DisarmReason, v1::ArmInfo>> finished;
  std::optional<v1::ArmInfo> changed;
  {
    absl::MutexLock lock(&mu_);
    auto it = arms_.find(arm_id);
    if (it == arms_.end()) return;
    ArmEntry& arm = it->second;
    if (arm.pending > 0) --arm.pending;
    if (!committed) return;
    arm.info.set_captured(arm.info.captured() + 1);
    arm.info.add_capture_ids(capture_id);
    if (!ArmFinished(arm.info) && arm.info.captured() >= EffectiveCount(arm.selector)) {
      FinishArmLocked(arm, v1::ARM_DONE, &finished);
      TrimFinishedArmsLocked();
    } else {
      changed = arm.info;
    }
  }
  if (changed.has_value()) {
    v1::Event event;
    *event.mutable_arm_changed() = *changed;
    events_->Publish(std::move(event));
  }
  PushDisarms(finished);
}

}  // namespace kerncap::link
