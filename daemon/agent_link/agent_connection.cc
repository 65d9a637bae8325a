#include "daemon/agent_link/agent_connection.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/agent_link/process_name.h"
#include "common/capture_id.h"
#include "common/log.h"
#include "daemon/agent_link/link_ids.h"
#include "daemon/agent_link/wire_convert.h"

namespace kerncap::link {
namespace {

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// Longest text of an agent's that goes into one log field.
constexpr size_t kMaxLoggedField = 512;

// Distinct zero-chunk lengths a connection learns (ZeroChunkFingerprints):
// the chunk size and up to this many region tails, ~1 ms of arithmetic each.
constexpr size_t kMaxZeroChunkLengths = 256;

std::string Hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

// The agent's process as the kernel knows it, in place of what its Hello
// says (issue 28): an agent cannot commit a capture as another process or
// another user's. The name and command line are read from /proc for the
// credentials' pid; where they cannot be read (the process is gone), the
// Hello's are kept, bounded.
LinkStatus TakeIdentityFromCredentials(int fd, HelloMsg* hello, uint32_t* uid) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.pid <= 0) {
    return LinkStatus::Error("cannot read the agent socket's credentials");
  }
  if (hello->pid != static_cast<uint32_t>(cred.pid)) {
    // A pid namespace (containers) also makes them differ: noted, not fatal.
    log::Info("agent.pid_from_credentials",
              {{"hello_pid", hello->pid}, {"pid", cred.pid}, {"uid", cred.uid}});
  }
  hello->pid = static_cast<uint32_t>(cred.pid);
  *uid = cred.uid;
  if (std::string host = Hostname(); !host.empty()) hello->hostname = host;
  // The daemon's own process (in-process tests of the link, with several
  // agents on socket pairs) has one /proc entry for all of them; no other
  // process can have the daemon's pid.
  if (cred.pid == ::getpid()) return LinkStatus::Ok();
  constexpr size_t kMaxArgs = 256;
  constexpr size_t kMaxArgBytes = 4096;
  if (std::string name = ProcessNameOf(cred.pid); !name.empty()) hello->process_name = name;
  std::vector<std::string> argv = CommandLineOf(cred.pid, kMaxArgs, kMaxArgBytes);
  if (!argv.empty()) hello->cmdline = std::move(argv);
  return LinkStatus::Ok();
}

void SetRecvTimeout(int fd, absl::Duration d) {
  timeval tv = absl::ToTimeval(d);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

}  // namespace

AgentConnection::AgentConnection(ConnectionHost& host, const AgentLinkServerOptions& options,
                                 EventBus& events, UniqueFd fd)
    : host_(host), options_(options), events_(events), fd_(std::move(fd)) {}

AgentConnection::~AgentConnection() {
  // The ingest (and with it any slot callbacks) must go before the ring.
  if (capture_.has_value()) ReleaseDeclaredChunks();
  capture_.reset();
  if (ring_charged_ > 0) host_.UnchargeRing(ring_charged_, !release_capable_);
}

void AgentConnection::StartThread(std::function<void()> body) {
  thread_ = std::thread(std::move(body));
}

void AgentConnection::Join() {
  if (thread_.joinable()) thread_.join();
}

void AgentConnection::Refuse(const std::string& message) {
  ErrorMsg err;
  err.message = message;
  (void)SetSendTimeout(fd_.get(), 100);
  (void)Send(err);
}

void AgentConnection::Kick() { ::shutdown(fd_.get(), SHUT_RDWR); }

void AgentConnection::ReleaseSlot(uint64_t generation, uint32_t slot) {
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

void AgentConnection::Revoke(const std::string& reason) {
  if (revoke_sent_.exchange(true)) return;
  revoke_sent_ms_ = NowMs();
  RingRevokeMsg msg;
  msg.reason = reason;
  (void)Send(msg);
}

bool AgentConnection::MayLog() {
  absl::MutexLock lock(&log_mu_);
  const double rate = options_.agent_log_lines_per_second;
  const double burst = std::max<double>(1, options_.agent_log_burst);
  const absl::Time now = absl::Now();
  if (log_tokens_ < 0) {
    log_tokens_ = burst;
    log_refilled_ = now;
  }
  log_tokens_ = std::min(burst, log_tokens_ + rate * absl::ToDoubleSeconds(now - log_refilled_));
  log_refilled_ = now;
  if (log_tokens_ >= 1) {
    log_tokens_ -= 1;
    return true;
  }
  ++log_suppressed_;
  ++log_suppressed_total_;
  return false;
}

void AgentConnection::FlushSuppressed() {
  uint64_t n = 0;
  uint64_t total = 0;
  {
    absl::MutexLock lock(&log_mu_);
    n = log_suppressed_;
    total = log_suppressed_total_;
    log_suppressed_ = 0;
  }
  if (n == 0) return;
  log::Warn("agent_link.suppressed",
            {{"agent", agent_id_},
             {"pid", hello_.pid},
             {"lines", n},
             {"total", total},
             {"reason", absl::StrFormat("more than %d lines at %g/s from this agent's reports",
                                        options_.agent_log_burst,
                                        options_.agent_log_lines_per_second)}});
}

uint64_t AgentConnection::lines_suppressed() {
  absl::MutexLock lock(&log_mu_);
  return log_suppressed_total_;
}

v1::AgentInfo AgentConnection::info() {
  absl::MutexLock lock(&info_mu_);
  return info_;
}

namespace {

// Held by a WriteRegion callback: gives the slot back when the sink calls the
// callback, or when the sink drops it without calling (an aborted ingest), so
// an agent never waits forever for a slot. Keeps the ring mapped meanwhile.
class SlotLease {
 public:
  SlotLease(std::weak_ptr<AgentConnection> conn, std::shared_ptr<RingMapping> ring,
            uint64_t generation, uint32_t slot)
      : conn_(std::move(conn)), ring_(std::move(ring)), generation_(generation), slot_(slot) {}
  ~SlotLease() { Release(); }
  void Release();

 private:
  std::weak_ptr<AgentConnection> conn_;
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

LinkStatus AgentConnection::Handshake() {
  const AgentLinkServerOptions& opt = options_;
  SetRecvTimeout(fd_.get(), opt.hello_timeout);
  (void)SetSendTimeout(fd_.get(), opt.send_timeout_ms);
  LinkResult<Frame> frame = RecvFrame(fd_.get(), opt.limits);
  if (!frame.ok()) return LinkStatus::Error("no Hello: " + frame.error());
  SetRecvTimeout(fd_.get(), absl::ZeroDuration());
  LinkStatus status = DecodeBody(*frame, &hello_);
  if (!status.ok()) return status;
  status = TakeIdentityFromCredentials(fd_.get(), &hello_, &uid_);
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
  agent_id_ = RandomLinkId("agt-");
  {
    absl::MutexLock lock(&info_mu_);
    info_ = AgentInfoFromHello(hello_, agent_id_, NowMs());
    info_.mutable_process()->set_uid(uid_);
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
  fingerprints_ = post_unchanged_ && opt.max_remembered_fingerprints > 0 &&
                  HasFeature(hello_.features, kFeatureChunkFingerprints);
  if (fingerprints_) {
    welcome.features.push_back(kFeatureChunkFingerprints);
    remembered_ = std::make_unique<RememberedChunks>(opt.max_remembered_fingerprints);
    zero_chunks_ = std::make_unique<ZeroChunkFingerprints>(opt.chunk_size, kMaxZeroChunkLengths);
  }
  if (HasFeature(hello_.features, kFeatureSubstitution)) {
    welcome.features.push_back(kFeatureSubstitution);
  }
  census_ = HasFeature(hello_.features, kFeatureKernelCensus);
  if (census_) welcome.features.push_back(kFeatureKernelCensus);
  sample_ = HasFeature(hello_.features, kFeatureLaunchSample);
  if (sample_) welcome.features.push_back(kFeatureLaunchSample);
  // Registration and the Welcome's arm snapshot happen under send_mu_, so an
  // Arm() racing with this handshake is either in the snapshot or pushed
  // after the Welcome, never lost and never before it.
  absl::MutexLock send_lock(&send_mu_);
  if (!host_.RegisterAgent(shared_from_this(), &welcome.arms)) {
    return LinkStatus::Error("daemon shutting down");
  }
  registered_ = true;
  int fd = ring_fd.get();
  status = lazy_ring_ ? SendMessage(fd_.get(), welcome)
                      : SendMessage(fd_.get(), welcome, {}, &fd, 1);
  if (!status.ok()) {
    send_failed_ = true;
    return status;
  }
  return LinkStatus::Ok();
}

LinkResult<UniqueFd> AgentConnection::CreateRing(bool may_reclaim) {
  const AgentLinkServerOptions& opt = options_;
  const uint64_t bytes =
      host_.ChargeRing(this, opt.slot_size, opt.slot_count, may_reclaim, !release_capable_);
  if (bytes == 0) {
    if (!release_capable_ && opt.max_pinned_ring_share < 1.0) {
      return LinkStatus::Error(absl::StrFormat(
          "the share of the staging budget (--staging-total-gib) that rings of agents which "
          "cannot give them back may hold (%g) is in use (a ring needs at least 2 slots of %d "
          "bytes); an agent that speaks lazy_ring and ring_release gets one when it captures",
          opt.max_pinned_ring_share, opt.slot_size));
    }
    const bool configured = opt.max_total_ring_bytes > 0;
    return LinkStatus::Error(absl::StrFormat(
        "the --staging-total-gib budget of %d bytes%s is in use by the rings of captures in "
        "flight (a ring needs at least 2 slots of %d bytes); try again when they finished",
        configured ? opt.max_total_ring_bytes : opt.default_total_ring_bytes,
        configured ? "" : " (kerncapd's bound when it is 0)", opt.slot_size));
  }
  RingLayout layout{opt.slot_size, static_cast<uint32_t>(bytes / opt.slot_size)};
  absl::Time t0 = absl::Now();
  LinkResult<UniqueFd> ring_fd = CreateRingMemfd(layout, "kerncap-ring");
  if (!ring_fd.ok()) {
    host_.UnchargeRing(bytes, !release_capable_);
    return ring_fd.status();
  }
  LinkResult<RingMapping> mapping = RingMapping::Map(ring_fd->get(), layout, false);
  if (!mapping.ok()) {
    host_.UnchargeRing(bytes, !release_capable_);
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
  revoke_sent_ms_ = 0;
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

LinkStatus AgentConnection::OnRingRequest(const Frame& frame) {
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

LinkStatus AgentConnection::OnRingRelease(const Frame& frame) {
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
  revoke_sent_ms_ = 0;
  const uint64_t bytes = ring_charged_;
  ring_charged_ = 0;
  host_.UnchargeRing(bytes, !release_capable_);
  log::Info("agent_link.ring_released",
            {{"agent", agent_id_}, {"bytes", bytes}, {"reason", std::string(WireName(msg.reason))}});
  return LinkStatus::Ok();
}

LinkStatus AgentConnection::OnSubstitutionReport(const Frame& frame) {
  if (!HasFeature(hello_.features, kFeatureSubstitution)) {
    return LinkStatus::Error("SubstitutionReport from an agent that did not offer substitution");
  }
  SubstitutionReportMsg msg;
  LinkStatus status = DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  if ((msg.state == SubstitutionState::kRefused || msg.state == SubstitutionState::kEnded) &&
      MayLog()) {
    FlushSuppressed();
    log::Info("substitution.agent_" + std::string(WireName(msg.state)),
              {{"agent", agent_id_},
               {"substitution", msg.sub_id.substr(0, kMaxLoggedField)},
               {"variant_launches", msg.variant_launches},
               {"reason", msg.reason.substr(0, kMaxLoggedField)}});
  }
  host_.OnSubstitutionReport(agent_id_, msg);
  return LinkStatus::Ok();
}

LinkStatus AgentConnection::OnDispatchSkipped(const Frame& frame) {
  DispatchSkippedMsg msg;
  LinkStatus status = DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  // The agent is not trusted: what it says is cut to size, and its reports
  // cost a bounded number of log lines and events (MayLog).
  if (msg.kernel.size() > kMaxKernelNameBytes) msg.kernel.resize(kMaxKernelNameBytes);
  if (msg.reason.size() > kMaxLoggedField) msg.reason.resize(kMaxLoggedField);
  if (msg.arm_id.size() > kMaxLoggedField) msg.arm_id.resize(kMaxLoggedField);
  if (MayLog()) {
    FlushSuppressed();
    std::string reason = absl::StrCat("dispatch ", msg.dispatch_index, " of ", msg.kernel,
                                      " not captured: ", msg.reason);
    if (msg.retried) absl::StrAppend(&reason, " (the arm takes a later matching dispatch)");
    log::Warn("capture.skipped", {{"agent", agent_id_},
                                  {"arm", msg.arm_id},
                                  {"kernel", msg.kernel.substr(0, kMaxLoggedField)},
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
    event.set_owner_uid(uid_);
    events_.Publish(std::move(event));
  }
  // The arm's own record is bounded (ArmRegistry::kMaxSkipsKept) and counts
  // every skip, logged or not.
  if (!msg.arm_id.empty()) {
    v1::SkippedDispatch s;
    s.set_agent_id(agent_id_);
    s.set_pid(hello_.pid);
    s.set_kernel(msg.kernel);
    s.set_dispatch_index(msg.dispatch_index);
    s.set_reason(msg.reason);
    s.set_retried(msg.retried);
    s.set_unix_ms(NowMs());
    host_.NoteSkipped(msg.arm_id, uid_, std::move(s));
  }
  return LinkStatus::Ok();
}

LinkStatus AgentConnection::ServeFrames() {
  const FrameLimits& limits = options_.limits;
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
      case MessageType::kKnownChunksQuery: status = OnKnownChunksQuery(*frame); break;
      case MessageType::kChunksKnown: status = OnChunksKnown(*frame); break;
      case MessageType::kChunkFingerprints: status = OnChunkFingerprints(*frame); break;
      case MessageType::kCodeObject: status = OnCodeObject(*frame); break;
      case MessageType::kCaptureEnd: status = OnCaptureEnd(*frame); break;
      case MessageType::kCaptureAbort: status = OnCaptureAbort(*frame); break;
      case MessageType::kRingRequest: status = OnRingRequest(*frame); break;
      case MessageType::kRingRelease: status = OnRingRelease(*frame); break;
      case MessageType::kDispatchSkipped: status = OnDispatchSkipped(*frame); break;
      case MessageType::kSubstitutionReport: status = OnSubstitutionReport(*frame); break;
      case MessageType::kKernelsReport: status = OnKernelsReport(*frame); break;
      case MessageType::kSampleReport: status = OnSampleReport(*frame); break;
      case MessageType::kError: {
        ErrorMsg err;
        (void)DecodeBody(*frame, &err);
        log::Warn("agent_link.agent_error",
                  {{"agent", agent_id_}, {"message", err.message.substr(0, kMaxLoggedField)}});
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

LinkStatus AgentConnection::CheckToken(uint64_t token, const char* what) {
  if (!capture_.has_value()) {
    return LinkStatus::Error(std::string(what) + " without CaptureBegin");
  }
  if (capture_->token != token) {
    return LinkStatus::Error(std::string(what) + " for token " + std::to_string(token) +
                             ", capture in flight is " + std::to_string(capture_->token));
  }
  return LinkStatus::Ok();
}

void AgentConnection::ReleaseDeclaredChunks() {
  if (!capture_.has_value() || capture_->declared_chunks == 0) return;
  host_.UnchargeDeclaredChunks(capture_->declared_chunks);
  capture_->declared_chunks = 0;
}

void AgentConnection::DropIngest(const std::string& abort_reason) {
  if (!capture_.has_value() || capture_->ingest == nullptr) return;
  if (!abort_reason.empty()) capture_->ingest->Abort(abort_reason);
  capture_->ingest.reset();
  ReleaseDeclaredChunks();
  host_.IngestFinished();
}

void AgentConnection::FailCapture(const std::string& reason) {
  Capture& c = *capture_;
  if (c.failed) return;
  c.failed = true;
  DropIngest(reason);
  if (c.arm_reserved) {
    host_.ReleaseArm(c.arm_id, c.capture_id, /*committed=*/false, c.launch_shape);
    c.arm_reserved = false;
  }
  log::Warn("capture.failed",
            {{"capture", c.capture_id}, {"agent", agent_id_}, {"reason", reason}});
  v1::Event event;
  v1::CaptureFailed* f = event.mutable_capture_failed();
  f->set_capture_id(c.capture_id);
  f->set_agent_id(agent_id_);
  f->set_reason(reason);
  event.set_owner_uid(uid_);
  events_.Publish(std::move(event));
  CaptureResultMsg result;
  result.token = c.token;
  result.error = reason;
  (void)Send(result);
}

LinkStatus AgentConnection::OnCaptureBegin(const Frame& frame) {
  CaptureBeginMsg begin;
  LinkStatus status = DecodeBody(frame, &begin);
  if (!status.ok()) return status;
  if (capture_.has_value()) {
    return LinkStatus::Error("CaptureBegin while capture " + std::to_string(capture_->token) +
                             " is in flight");
  }
  const CaptureLimits& limits = options_.capture_limits;
  capture_.emplace();
  capturing_ = true;
  last_capture_ms_ = NowMs();
  Capture& c = *capture_;
  c.token = begin.token;
  c.capture_id = NewCaptureId();
  c.arm_id = begin.arm_id;
  c.last_progress = absl::Now();
  c.manifest.set_capture_id(c.capture_id);

  if (host_.Draining()) {
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
  google::protobuf::Map<std::string, std::string> arm_tags;
  std::string why = host_.ReserveArm(c.arm_id, hello_, uid_, begin, &arm_tags);
  if (!why.empty()) {
    FailCapture(why);
    return LinkStatus::Ok();
  }
  c.arm_reserved = true;
  c.launch_shape = begin.launch_shape;
  FillManifest(hello_, begin, frame.payload, &c.manifest);
  c.manifest.set_capture_id(c.capture_id);
  c.manifest.set_created_unix_ms(NowMs());
  // The process's user owns the capture (CaptureManifest.owner_uid).
  c.manifest.mutable_process()->set_uid(uid_);
  c.manifest.set_owner_uid(uid_);
  for (const auto& [k, v] : arm_tags) (*c.manifest.mutable_tags())[k] = v;
  absl::StatusOr<std::unique_ptr<CaptureIngest>> ingest = host_.BeginIngest();
  if (!ingest.ok()) {
    FailCapture(absl::StrCat("store refused capture: ", ingest.status().ToString()));
    return LinkStatus::Ok();
  }
  c.ingest = std::move(ingest).value();
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
  event.set_owner_uid(uid_);
  events_.Publish(std::move(event));
  return LinkStatus::Ok();
}

LinkStatus AgentConnection::OnRegionBegin(const Frame& frame) {
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
  const CaptureLimits& limits = options_.capture_limits;
  const uint64_t chunk = options_.chunk_size;
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
  if (!host_.ChargeDeclaredChunks(chunks)) {
    FailCapture(absl::StrFormat(
        "region %d of %d bytes does not fit: captures in flight already declare %d of the %d "
        "chunks kerncapd ingests at once; try again when they finished",
        msg.region, msg.size, host_.DeclaredChunksInFlight(),
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
  region.mutable_data()->set_chunk_size(options_.chunk_size);
  absl::StatusOr<int> handle = c.ingest->AddRegion(image, region);
  if (!handle.ok()) {
    FailCapture(absl::StrCat("adding region: ", handle.status().ToString()));
    return LinkStatus::Ok();
  }
  c.regions.push_back({image, *handle, msg.size});
  c.declared += msg.size;
  if (zero_chunks_ != nullptr) zero_chunks_->AddRegionTail(msg.size);
  return LinkStatus::Ok();
}

LinkStatus AgentConnection::OnSlotFilled(const Frame& frame) {
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
  const uint64_t chunk = options_.chunk_size;
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

LinkStatus AgentConnection::OnChunksUnchanged(const Frame& frame) {
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
  const uint64_t chunk = options_.chunk_size;
  const uint64_t begin = msg.first_chunk * chunk;
  c.received += std::min(region.size, begin + msg.chunk_count * chunk) - begin;
  PublishProgress(false);
  return LinkStatus::Ok();
}

LinkStatus AgentConnection::CheckFingerprintFrame(const Frame& frame, const char* what,
                                                  std::vector<ChunkFingerprint>* fps) {
  if (!fingerprints_) {
    return LinkStatus::Error(std::string(what) +
                             " from an agent that did not announce chunk_fingerprints");
  }
  // (The frame header's check, wire.cc, already bounds the payload.)
  if (!DecodeFingerprints(frame.payload, fps)) {
    return LinkStatus::Error(std::string(what) + " payload of " +
                             std::to_string(frame.payload.size()) +
                             " bytes is not a whole number of fingerprints");
  }
  return LinkStatus::Ok();
}

LinkStatus AgentConnection::CheckChunkRange(const Capture& c, uint32_t region,
                                            uint64_t first_chunk, uint64_t count,
                                            const char* what) {
  if (region >= c.region_count) {
    return LinkStatus::Error(std::string(what) + " for undeclared region " +
                             std::to_string(region));
  }
  if (c.failed) return LinkStatus::Ok();
  const uint64_t chunk = options_.chunk_size;
  const uint64_t chunks = (c.regions[region].size + chunk - 1) / chunk;
  if (count == 0 || first_chunk >= chunks || count > chunks - first_chunk) {
    return LinkStatus::Error(std::string(what) + " chunks [" + std::to_string(first_chunk) +
                             ", +" + std::to_string(count) + ") outside region " +
                             std::to_string(region) + " of " + std::to_string(chunks) +
                             " chunks");
  }
  return LinkStatus::Ok();
}

LinkStatus AgentConnection::OnKnownChunksQuery(const Frame& frame) {
  KnownChunksQueryMsg msg;
  LinkStatus status = DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  status = CheckToken(msg.token, "KnownChunksQuery");
  if (!status.ok()) return status;
  std::vector<ChunkFingerprint> fps;
  status = CheckFingerprintFrame(frame, "KnownChunksQuery", &fps);
  if (!status.ok()) return status;
  Capture& c = *capture_;
  KnownChunksAnswerMsg answer;
  answer.token = msg.token;
  answer.query_id = msg.query_id;
  std::string held(fps.size(), '\0');
  if (c.failed) {
    answer.error = "the capture already failed";
  } else {
    for (size_t i = 0; i < fps.size(); ++i) {
      const RememberedChunks::Entry* e = remembered_->Find(fps[i]);
      held[i] = (e != nullptr && c.ingest->HoldsChunk(e->digest)) || zero_chunks_->IsZero(fps[i])
                    ? 1
                    : 0;
    }
  }
  return Send(answer, held);
}

LinkStatus AgentConnection::OnChunksKnown(const Frame& frame) {
  ChunksKnownMsg msg;
  LinkStatus status = DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  status = CheckToken(msg.token, "ChunksKnown");
  if (!status.ok()) return status;
  std::vector<ChunkFingerprint> fps;
  status = CheckFingerprintFrame(frame, "ChunksKnown", &fps);
  if (!status.ok()) return status;
  if (fps.size() != msg.chunk_count) {
    return LinkStatus::Error("ChunksKnown names " + std::to_string(msg.chunk_count) +
                             " chunks but carries " + std::to_string(fps.size()) +
                             " fingerprints");
  }
  Capture& c = *capture_;
  status = CheckChunkRange(c, msg.region, msg.first_chunk, msg.chunk_count, "ChunksKnown");
  if (!status.ok() || c.failed) return status;
  const RegionState& region = c.regions[msg.region];
  const uint64_t chunk = options_.chunk_size;
  std::vector<Digest> digests;
  digests.reserve(fps.size());
  uint64_t bytes = 0;
  for (size_t i = 0; i < fps.size(); ++i) {
    const uint64_t at = (msg.first_chunk + i) * chunk;
    const uint64_t length = std::min(chunk, region.size - at);
    if (zero_chunks_->IsZeroOfLength(fps[i], length)) {
      digests.push_back(Digest{});  // all-zero: a zero chunk, never stored
      bytes += length;
      continue;
    }
    const RememberedChunks::Entry* e = remembered_->Find(fps[i]);
    if (e == nullptr || e->length != length) {
      FailCapture(absl::StrCat("region ", msg.region, " chunk ", msg.first_chunk + i,
                               ": the agent named it by a fingerprint kerncapd does not hold ",
                               e == nullptr ? "for this agent" : "for a chunk of that length"));
      return LinkStatus::Ok();
    }
    digests.push_back(e->digest);
    bytes += length;
  }
  absl::Status mark = c.ingest->MarkKnown(region.handle, msg.first_chunk, digests);
  if (!mark.ok()) {
    FailCapture(absl::StrCat("known chunks of region ", msg.region, ": ", mark.ToString()));
    return LinkStatus::Ok();
  }
  c.received += bytes;
  c.known_bytes += bytes;
  PublishProgress(false);
  return LinkStatus::Ok();
}

LinkStatus AgentConnection::OnChunkFingerprints(const Frame& frame) {
  ChunkFingerprintsMsg msg;
  LinkStatus status = DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  status = CheckToken(msg.token, "ChunkFingerprints");
  if (!status.ok()) return status;
  std::vector<ChunkFingerprint> fps;
  status = CheckFingerprintFrame(frame, "ChunkFingerprints", &fps);
  if (!status.ok()) return status;
  if (fps.size() != msg.chunk_count) {
    return LinkStatus::Error("ChunkFingerprints names " + std::to_string(msg.chunk_count) +
                             " chunks but carries " + std::to_string(fps.size()) +
                             " fingerprints");
  }
  Capture& c = *capture_;
  status = CheckChunkRange(c, msg.region, msg.first_chunk, msg.chunk_count, "ChunkFingerprints");
  if (!status.ok() || c.failed) return status;
  // Kept until the commit, which says what digests these chunks got; at most
  // one per declared chunk (the ranges are checked against the region).
  std::vector<std::pair<uint64_t, ChunkFingerprint>>& told = c.told[msg.region];
  for (size_t i = 0; i < fps.size(); ++i) told.emplace_back(msg.first_chunk + i, fps[i]);
  c.told_count += fps.size();
  if (c.told_count > c.declared_chunks) {
    return LinkStatus::Error("ChunkFingerprints for more chunks than the capture declared");
  }
  return LinkStatus::Ok();
}

void AgentConnection::RememberCommitted(const Capture& c) {
  const uint64_t chunk = options_.chunk_size;
  for (const auto& [region_index, told] : c.told) {
    const RegionState& region = c.regions[region_index];
    absl::StatusOr<std::vector<Digest>> digests = c.ingest->CommittedDigests(region.handle);
    if (!digests.ok()) {
      log::Warn("agent_link.fingerprints_not_remembered",
                {{"agent", agent_id_}, {"error", digests.status().ToString()}});
      return;
    }
    for (const auto& [index, fp] : told) {
      if (index >= digests->size()) continue;
      const uint64_t length = std::min(chunk, region.size - index * chunk);
      if (!remembered_->Remember(fp, {(*digests)[index], static_cast<uint32_t>(length)})) {
        return;  // full: later captures send these chunks again
      }
    }
  }
}

void AgentConnection::PublishProgress(bool force) {
  Capture& c = *capture_;
  absl::Time now = absl::Now();
  if (!force && now - c.last_progress < options_.progress_interval) return;
  c.last_progress = now;
  v1::Event event;
  v1::CaptureProgress* p = event.mutable_capture_progress();
  p->set_capture_id(c.capture_id);
  p->set_done_bytes(c.received);
  p->set_total_bytes(c.declared);
  event.set_owner_uid(uid_);
  events_.Publish(std::move(event));
}

LinkStatus AgentConnection::OnCodeObject(const Frame& frame) {
  CodeObjectMsg msg;
  LinkStatus status = DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  status = CheckToken(msg.token, "CodeObject");
  if (!status.ok()) return status;
  Capture& c = *capture_;
  if (c.failed) return LinkStatus::Ok();
  const CaptureLimits& limits = options_.capture_limits;
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

LinkStatus AgentConnection::OnCaptureEnd(const Frame& frame) {
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
      t->set_fingerprint_seconds(msg.timing.fingerprint_seconds);
    }
    if (fingerprints_) {
      c.manifest.mutable_agent_timing()->set_known_bytes(c.known_bytes);
    }
    v1::CaptureManifest manifest = c.manifest;
    absl::StatusOr<std::string> id = c.ingest->Commit(std::move(manifest));
    if (!id.ok()) {
      FailCapture(absl::StrCat("commit: ", id.status().ToString()));
    } else {
      if (fingerprints_) RememberCommitted(c);
      c.ingest.reset();
      ReleaseDeclaredChunks();
      host_.IngestFinished();
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
      s->set_owner_uid(uid_);
      event.set_owner_uid(uid_);
      events_.Publish(std::move(event));
      // After capture_committed, so watchers see the capture before the arm
      // that it completed turns DONE.
      if (c.arm_reserved) {
        host_.ReleaseArm(c.arm_id, *id, /*committed=*/true, c.launch_shape);
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

LinkStatus AgentConnection::OnCaptureAbort(const Frame& frame) {
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

void AgentConnection::Cleanup(const std::string& reason) {
  if (capture_.has_value() && !capture_->failed) {
    Capture& c = *capture_;
    c.failed = true;
    const std::string why =
        reason.empty() ? std::string("agent disconnected") : "agent disconnected: " + reason;
    DropIngest(why);
    if (c.arm_reserved) host_.ReleaseArm(c.arm_id, c.capture_id, false, c.launch_shape);
    log::Warn("capture.failed", {{"capture", c.capture_id}, {"agent", agent_id_}, {"reason", why}});
    v1::Event event;
    v1::CaptureFailed* f = event.mutable_capture_failed();
    f->set_capture_id(c.capture_id);
    f->set_agent_id(agent_id_);
    f->set_reason(why);
    event.set_owner_uid(uid_);
    events_.Publish(std::move(event));
  }
  ReleaseDeclaredChunks();
  capture_.reset();
  capturing_ = false;
  FlushSuppressed();
  {
    absl::MutexLock lock(&census_mu_);
    census_closed_ = true;
    census_cv_.SignalAll();
  }
  Kick();
}

namespace {
// The module field names a code object in the agent's process; far shorter
// than this in practice ("cuda-module-123", "hsa-executable-0x...").
constexpr size_t kMaxKernelModuleBytes = 256;

// A kernel's names as the census and the launch sample may carry them.
bool KernelNamesInBounds(const std::string& mangled, const std::string& demangled) {
  return !mangled.empty() && mangled.size() <= kMaxKernelNameBytes &&
         demangled.size() <= kMaxKernelNameBytes;
}
}  // namespace

LinkStatus AgentConnection::OnKernelsReport(const Frame& frame) {
  if (!census_) return LinkStatus::Error("KernelsReport from an agent that did not offer kernel_census");
  KernelsReportMsg msg;
  LinkStatus status = DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  // The agent is not trusted: a page is bounded as the protocol says, and
  // must move forward (so a census always ends).
  if (msg.kernels.size() > kMaxReportedKernels) {
    return LinkStatus::Error("KernelsReport with " + std::to_string(msg.kernels.size()) +
                             " kernels (at most " + std::to_string(kMaxReportedKernels) + ")");
  }
  for (const LoadedKernelInfo& k : msg.kernels) {
    if (!KernelNamesInBounds(k.mangled_name, k.demangled_name) ||
        k.module.size() > kMaxKernelModuleBytes) {
      return LinkStatus::Error("KernelsReport with an empty or over-long kernel or module name");
    }
  }
  if (msg.next_offset != 0 && msg.next_offset <= msg.offset) {
    return LinkStatus::Error("KernelsReport whose next_offset " + std::to_string(msg.next_offset) +
                             " does not move past its offset " + std::to_string(msg.offset));
  }
  absl::MutexLock lock(&census_mu_);
  if (msg.request_id == 0 || msg.request_id != census_waiting_id_ ||
      msg.offset != census_waiting_offset_ || census_page_.has_value()) {
    return LinkStatus::Ok();  // nobody waits for it any more
  }
  census_page_ = std::move(msg);
  census_cv_.SignalAll();
  return LinkStatus::Ok();
}

absl::StatusOr<AgentConnection::KernelCensus> AgentConnection::RequestKernels(
    absl::Duration timeout, size_t max_kernels, uint64_t max_bytes, CensusBudget* shared) {
  if (!census_) {
    return absl::FailedPreconditionError(
        "this agent does not offer the kernel census (an agent from before it)");
  }
  const absl::Time deadline = absl::Now() + timeout;
  // Another caller's census of this agent counts against this one's time:
  // a slow agent cannot queue every ListKernels behind it.
  if (!census_call_mu_.LockWhenWithDeadline(absl::Condition::kTrue, deadline)) {
    census_call_mu_.Unlock();
    return absl::DeadlineExceededError(absl::StrCat(
        "another census of this agent did not finish within ", absl::FormatDuration(timeout)));
  }
  struct Unlock {
    absl::Mutex* mu;
    ~Unlock() { mu->Unlock(); }
  } unlock{&census_call_mu_};
  KernelCensus out;
  bool full = false;  // a byte bound was reached: the rest is counted
  uint64_t offset = 0;
  while (true) {
    KernelsRequestMsg request;
    {
      absl::MutexLock lock(&census_mu_);
      if (census_closed_) return absl::UnavailableError("the agent disconnected");
      request.request_id = census_next_id_++;
      request.offset = offset;
      census_waiting_id_ = request.request_id;
      census_waiting_offset_ = offset;
      census_page_.reset();
    }
    if (!Send(request).ok()) return absl::UnavailableError("the agent disconnected");
    KernelsReportMsg page;
    {
      absl::MutexLock lock(&census_mu_);
      while (!census_page_.has_value() && !census_closed_) {
        if (census_cv_.WaitWithDeadline(&census_mu_, deadline)) break;
      }
      census_waiting_id_ = 0;
      if (!census_page_.has_value()) {
        if (census_closed_) return absl::UnavailableError("the agent disconnected");
        return absl::DeadlineExceededError(absl::StrCat(
            "the agent did not answer the kernel census within ", absl::FormatDuration(timeout)));
      }
      page = std::move(*census_page_);
      census_page_.reset();
    }
    out.left_out += page.left_out;
    for (LoadedKernelInfo& k : page.kernels) {
      // What an entry costs the daemon: its strings and the proto's fields.
      const uint64_t cost = k.mangled_name.size() + k.demangled_name.size() + k.module.size() + 64;
      if (!full && out.kernels.size() >= max_kernels) {
        full = true;
        out.truncated = absl::StrCat("more than ", max_kernels, " kernels (the daemon keeps at most ",
                                     max_kernels, " per agent)");
      }
      if (!full && max_bytes > 0 && out.bytes + cost > max_bytes) {
        full = true;
        out.truncated = absl::StrCat("more than ", max_bytes,
                                     " bytes of kernel names (the daemon keeps at most ", max_bytes,
                                     " per agent, --census-mib-per-agent)");
      }
      if (!full && shared != nullptr) {
        std::string why = shared->Charge(cost);
        if (!why.empty()) {
          full = true;
          out.truncated = std::move(why);
        }
      }
      if (full) {
        ++out.left_out;
        continue;
      }
      out.bytes += cost;
      out.kernels.push_back(std::move(k));
    }
    if (page.next_offset == 0) break;
    if (full || out.kernels.size() >= max_kernels) {
      if (page.total > page.next_offset) out.left_out += page.total - page.next_offset;
      break;
    }
    offset = page.next_offset;
  }
  return out;
}

LinkStatus AgentConnection::OnSampleReport(const Frame& frame) {
  if (!sample_) return LinkStatus::Error("SampleReport from an agent that did not offer launch_sample");
  SampleReportMsg msg;
  LinkStatus status = DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  // The agent is not trusted: the report is bounded as the protocol says.
  if (msg.kernels.size() > kMaxSampledKernels) {
    return LinkStatus::Error("SampleReport with " + std::to_string(msg.kernels.size()) +
                             " kernels (at most " + std::to_string(kMaxSampledKernels) + ")");
  }
  for (const SampledKernel& k : msg.kernels) {
    if (!KernelNamesInBounds(k.mangled_name, k.demangled_name)) {
      return LinkStatus::Error("SampleReport with an empty or over-long kernel name");
    }
    if (k.configs.size() > kMaxSampledConfigsPerKernel ||
        k.argument_shapes > kMaxArgumentShapesCounted) {
      return LinkStatus::Error("SampleReport with more configurations or argument shapes per "
                               "kernel than the protocol allows");
    }
  }
  if (!std::isfinite(msg.seconds) || msg.seconds < 0 ||
      msg.seconds > static_cast<double>(kMaxSampleMs) / 1000.0 + 1.0) {
    return LinkStatus::Error("SampleReport with a sample of " + std::to_string(msg.seconds) +
                             " s");
  }
  if (msg.error.size() > 1024) msg.error.resize(1024);
  absl::MutexLock lock(&census_mu_);
  if (msg.sample_id == 0 || msg.sample_id != sample_running_id_ || !sample_stopping_ ||
      sample_report_.has_value()) {
    return LinkStatus::Ok();  // nobody waits for it any more
  }
  sample_report_ = std::move(msg);
  census_cv_.SignalAll();
  return LinkStatus::Ok();
}

absl::StatusOr<SampleReportMsg> AgentConnection::SampleLaunches(absl::Duration duration,
                                                                absl::Duration answer_timeout) {
  if (!sample_) {
    return absl::FailedPreconditionError(
        "this agent does not offer launch sampling (an agent from before it)");
  }
  SampleStartMsg start;
  {
    absl::MutexLock lock(&census_mu_);
    if (census_closed_) return absl::UnavailableError("the agent disconnected");
    if (sample_running_id_ != 0) {
      return absl::FailedPreconditionError("another sample of this agent is running");
    }
    start.sample_id = sample_next_id_++;
    sample_running_id_ = start.sample_id;
    sample_stopping_ = false;
    sample_report_.reset();
  }
  start.duration_ms = static_cast<uint64_t>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(duration), 0, kMaxSampleMs));
  // Whatever happens from here, the sample is over for this connection when
  // this returns (a report that comes later is dropped).
  struct EndSample {
    AgentConnection* c;
    ~EndSample() {
      absl::MutexLock lock(&c->census_mu_);
      c->sample_running_id_ = 0;
      c->sample_stopping_ = false;
      c->sample_report_.reset();
    }
  } end{this};
  if (!Send(start).ok()) return absl::UnavailableError("the agent disconnected");
  {
    absl::MutexLock lock(&census_mu_);
    const absl::Time until = absl::Now() + duration;
    while (!census_closed_) {
      if (census_cv_.WaitWithDeadline(&census_mu_, until)) break;
    }
    if (census_closed_) return absl::UnavailableError("the agent disconnected while sampling");
    sample_stopping_ = true;
  }
  SampleStopMsg stop;
  stop.sample_id = start.sample_id;
  if (!Send(stop).ok()) return absl::UnavailableError("the agent disconnected");
  absl::MutexLock lock(&census_mu_);
  const absl::Time deadline = absl::Now() + answer_timeout;
  while (!sample_report_.has_value() && !census_closed_) {
    if (census_cv_.WaitWithDeadline(&census_mu_, deadline)) break;
  }
  if (!sample_report_.has_value()) {
    if (census_closed_) return absl::UnavailableError("the agent disconnected");
    return absl::DeadlineExceededError(absl::StrCat(
        "the agent did not report its launch sample within ",
        absl::FormatDuration(answer_timeout)));
  }
  SampleReportMsg report = std::move(*sample_report_);
  if (!report.error.empty()) {
    return absl::InternalError("the agent could not sample: " + report.error);
  }
  return report;
}

}  // namespace kerncap::link
