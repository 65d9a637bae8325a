#include "agent/link/agent_link_client.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <new>
#include <set>
#include <sstream>

#include "agent/link/client_link.h"
#include "agent/link/kernel_census.h"
#include "agent/link/launch_sampler.h"
#include "agent/link/launcher_rank.h"
#include "common/agent_link/process_name.h"
#include "common/agent_link/ring.h"
#include "common/agent_link/socket_path.h"
#include "common/agent_link/wire.h"

namespace kerncap::agent {

using link::Frame;
using link::MessageType;
using link::UniqueFd;
using Clock = std::chrono::steady_clock;

namespace {

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string ReadSmallFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// This process's launcher rank: the one the options name, else the
// launcher's environment (what the Hello says and arms are checked against).
link::LauncherRank IdentityRank(const link::HelloMsg& identity) {
  return identity.rank.rank >= 0 ? identity.rank : LauncherRankFromEnv();
}

void FillIdentity(link::HelloMsg* h) {
  h->pid = static_cast<uint32_t>(::getpid());
  h->protocol_version = link::kProtocolVersion;
  if (h->hostname.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) == 0) h->hostname = host;
  }
  if (h->cmdline.empty()) {
    std::string raw = ReadSmallFile("/proc/self/cmdline");
    size_t start = 0;
    while (start < raw.size()) {
      size_t end = raw.find('\0', start);
      if (end == std::string::npos) end = raw.size();
      h->cmdline.push_back(raw.substr(start, end - start));
      start = end + 1;
    }
  }
  if (h->process_name.empty()) h->process_name = link::ProcessName();
  if (h->platform == link::Platform::kUnspecified) h->platform = link::Platform::kSynthetic;
  h->rank = IdentityRank(*h);
}

// Registry of live clients for the fork handlers.
std::mutex* g_clients_mu = new std::mutex;  // leaked: usable during exit
std::set<AgentLinkClient*>* g_clients = new std::set<AgentLinkClient*>;
std::once_flag g_atfork_once;

}  // namespace

// ---------------------------------------------------------------------------
// AgentLinkClient

AgentLinkClient::AgentLinkClient(AgentLinkClientOptions options)
    : options_(std::move(options)) {
  socket_path_ =
      options_.socket_path.empty() ? link::ResolveAgentConnectPath() : options_.socket_path;
  std::call_once(g_atfork_once,
                 [] { ::pthread_atfork(&ForkPrepare, &ForkParent, &ForkChild); });
  std::lock_guard<std::mutex> lock(*g_clients_mu);
  g_clients->insert(this);
}

AgentLinkClient::~AgentLinkClient() {
  Stop();
  std::lock_guard<std::mutex> lock(*g_clients_mu);
  g_clients->erase(this);
}

void AgentLinkClient::Start() {
  std::unique_lock<std::mutex> lock(mu_);
  if (started_) return;
  started_ = true;
  stop_ = false;
  StartThreadLocked();
  cv_.wait_for(lock, std::chrono::milliseconds(options_.initial_wait_ms),
               [this] { return first_attempt_done_ || stop_; });
}

void AgentLinkClient::StartThreadLocked() {
  try {
    thread_ = new std::thread([this] { Run(); });
  } catch (const std::exception& e) {
    thread_ = nullptr;
    last_error_ = std::string("cannot start agent link thread: ") + e.what();
    first_attempt_done_ = true;
  }
}

void AgentLinkClient::Stop() {
  std::thread* thread = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) return;
    started_ = false;
    stop_ = true;
    if (link_) ::shutdown(link_->fd.get(), SHUT_RDWR);
    if (connecting_fd_ >= 0) ::shutdown(connecting_fd_, SHUT_RDWR);
    thread = thread_;
    thread_ = nullptr;
    cv_.notify_all();
  }
  if (thread != nullptr) {
    if (thread->joinable()) thread->join();
    delete thread;
  }
  std::thread* matcher = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    matcher = match_thread_;
    match_thread_ = nullptr;
    match_stop_ = true;
    match_cv_.notify_all();
  }
  if (matcher != nullptr) {
    if (matcher->joinable()) matcher->join();
    delete matcher;
  }
}

void AgentLinkClient::Run() {
  int backoff = options_.retry_initial_ms;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    std::string error;
    std::shared_ptr<Link> link = Connect(&error);
    {
      std::unique_lock<std::mutex> lock(mu_);
      first_attempt_done_ = true;
      cv_.notify_all();
      if (link == nullptr) {
        last_error_ = error;
        cv_.wait_for(lock, std::chrono::milliseconds(backoff), [this] { return stop_; });
        backoff = std::min(backoff * 2, options_.retry_max_ms);
        continue;
      }
      if (stop_) return;
    }
    Clock::time_point connected_at = Clock::now();
    ReadLoop(link);
    // A daemon that keeps dropping us right after the handshake must not
    // turn this thread into a busy loop: back off unless the link was stable.
    if (Clock::now() - connected_at > std::chrono::milliseconds(options_.retry_max_ms)) {
      backoff = options_.retry_initial_ms;
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(backoff), [this] { return stop_; });
    backoff = std::min(backoff * 2, options_.retry_max_ms);
  }
}

std::shared_ptr<AgentLinkClient::Link> AgentLinkClient::Connect(std::string* error) {
  LinkResult<UniqueFd> fd = link::ConnectUnix(socket_path_);
  if (!fd.ok()) {
    *error = fd.error();
    return nullptr;
  }
  auto link = std::make_shared<Link>();
  link->fd = std::move(fd).value();
  {
    // Lets Stop() interrupt a handshake with an unresponsive daemon.
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return nullptr;
    connecting_fd_ = link->fd.get();
  }
  struct ClearConnecting {
    AgentLinkClient* self;
    ~ClearConnecting() {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->connecting_fd_ = -1;
    }
  } clear_connecting{this};
  (void)link::SetSendTimeout(link->fd.get(), options_.send_timeout_ms);
  timeval tv{options_.handshake_timeout_ms / 1000, (options_.handshake_timeout_ms % 1000) * 1000};
  ::setsockopt(link->fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

  link::HelloMsg hello = options_.identity;
  try {
    FillIdentity(&hello);
  } catch (const std::exception& e) {
    *error = std::string("collecting identity: ") + e.what();
    return nullptr;
  }
  if (options_.lazy_ring) {
    hello.features.push_back(link::kFeatureLazyRing);
    hello.features.push_back(link::kFeatureRingRelease);
  }
  hello.features.push_back(link::kFeatureDispatchSkipped);
  hello.features.push_back(link::kFeaturePostUnchanged);
  hello.features.push_back(link::kFeatureChunkFingerprints);
  if (options_.list_kernels) hello.features.push_back(link::kFeatureKernelCensus);
  if (options_.on_substitute) hello.features.push_back(link::kFeatureSubstitution);
  if (options_.launch_sampler != nullptr) hello.features.push_back(link::kFeatureLaunchSample);
  LinkStatus status = link->SendNow(hello);
  if (!status.ok()) {
    *error = "sending Hello: " + status.message();
    return nullptr;
  }
  LinkResult<Frame> frame = link::RecvFrame(link->fd.get(), link::FrameLimits());
  if (!frame.ok()) {
    *error = "waiting for Welcome: " + frame.error();
    return nullptr;
  }
  if (frame->type == MessageType::kError) {
    link::ErrorMsg err;
    (void)link::DecodeBody(*frame, &err);
    *error = "daemon refused: " + err.message;
    return nullptr;
  }
  link::WelcomeMsg welcome;
  status = link::DecodeBody(*frame, &welcome);
  if (!status.ok()) {
    *error = status.message();
    return nullptr;
  }
  link->layout = {welcome.slot_size, welcome.slot_count};
  link->chunk_size = welcome.chunk_size;
  link->max_payload = welcome.max_payload;
  link->daemon_features = welcome.features;
  const bool lazy = options_.lazy_ring && link->HasFeature(link::kFeatureLazyRing) &&
                    welcome.slot_count == 0 && frame->fds.empty();
  if (lazy) {
    if (welcome.chunk_size == 0) {
      *error = "bad Welcome: no chunk size";
      return nullptr;
    }
    link->ring_state = internal::RingState::kNone;
  } else {
    std::string bad = link::ValidateRingLayout(link->layout, welcome.chunk_size);
    if (!bad.empty() || frame->fds.size() != 1) {
      *error = "bad Welcome: " + (bad.empty() ? std::string("no ring fd") : bad);
      return nullptr;
    }
    status = link::CheckRingFd(frame->fds[0].get(), link->layout);
    if (!status.ok()) {
      *error = status.message();
      return nullptr;
    }
    LinkResult<link::RingMapping> ring =
        link::RingMapping::Map(frame->fds[0].get(), link->layout, /*writable=*/true);
    if (!ring.ok()) {
      *error = ring.error();
      return nullptr;
    }
    link->ring = std::move(ring).value();
    if (options_.on_ring_mapped) options_.on_ring_mapped(link->ring.base(), link->layout.bytes());
    link->on_unmap = options_.on_ring_unmapping;
    for (uint32_t i = 0; i < link->layout.slot_count; ++i) link->free_slots.push_back(i);
    link->daemon_owns.assign(link->layout.slot_count, false);
  }
  link->agent_id = welcome.agent_id;
  tv = {0, 0};
  ::setsockopt(link->fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  try {
    link->StartSender();
  } catch (const std::exception& e) {
    *error = std::string("cannot start the agent link sender thread: ") + e.what();
    return nullptr;
  }

  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return nullptr;  // ~ClientLink joins the sender
  arms_.clear();
  last_taken_.reset();
  for (const link::ArmMsg& arm : welcome.arms) AddArmLocked(arm);
  RecomputeArmedLocked();
  MaybeRequestRingLocked(link, /*force=*/false);
  link_ = link;
  ++generation_;
  last_error_.clear();
  cv_.notify_all();
  return link;
}

void AgentLinkClient::ReadLoop(const std::shared_ptr<Link>& link) {
  std::string why;
  while (true) {
    LinkResult<Frame> frame = link::RecvFrame(link->fd.get(), link::FrameLimits());
    if (!frame.ok()) {
      why = frame.error();
      break;
    }
    LinkStatus status = HandleFrame(link, *frame);
    if (!status.ok()) {
      why = status.message();
      link::ErrorMsg err;
      err.message = why;
      (void)link->SendNow(err);
      break;
    }
  }
  ::shutdown(link->fd.get(), SHUT_RDWR);
  link->CloseSender();
  std::optional<CaptureOutcome> outcome;
  {
    std::lock_guard<std::mutex> lock(mu_);
    link->alive = false;
    if (link_ == link) link_ = nullptr;
    // No daemon, no capture: a stale arm must not fire while disconnected.
    arms_.clear();
    last_taken_.reset();
    RecomputeArmedLocked();
    if (!stop_) last_error_ = "disconnected: " + why;
    if (link->ending_async) {
      outcome = SettleAsyncLocked(link, "", "connection to kerncapd lost before its verdict: " + why);
    }
    cv_.notify_all();
  }
  if (outcome && options_.on_capture_result) options_.on_capture_result(*outcome);
  // No daemon, no substitution and no sample: nobody would see their results
  // or end them.
  if (options_.launch_sampler != nullptr) options_.launch_sampler->Abort();
  if (options_.on_link_lost) options_.on_link_lost();
}

void AgentLinkClient::SendSubstitutionReport(const link::SubstitutionReportMsg& msg) {
  std::shared_ptr<Link> link;
  {
    std::lock_guard<std::mutex> lock(mu_);
    link = link_;
  }
  if (link != nullptr && link->HasFeature(link::kFeatureSubstitution)) (void)link->Send(msg);
}

void AgentLinkClient::MaybeRequestRingLocked(const std::shared_ptr<Link>& link, bool force) {
  if (link == nullptr) return;
  // A refused ring is asked for again only by a capture (the budget may
  // have room by then); an arm alone asks once.
  const bool retry = force && link->ring_state == internal::RingState::kFailed;
  if (link->ring_state != internal::RingState::kNone && !retry) return;
  if (!force && arms_.empty()) return;
  link::RingRequestMsg msg;
  msg.reason = force ? link::RingRequestReason::kCapture : link::RingRequestReason::kArmed;
  if (link->Send(msg).ok()) link->ring_state = internal::RingState::kRequested;
}

void AgentLinkClient::MaybeReleaseRingLocked(const std::shared_ptr<Link>& link) {
  if (link == nullptr || !options_.lazy_ring || !link->alive) return;
  if (!link->HasFeature(link::kFeatureRingRelease)) return;
  if (link->ring_state != internal::RingState::kReady || capture_active_) return;
  if (!link->ring_revoked && !arms_.empty()) return;
  for (bool owned : link->daemon_owns) {
    if (owned) return;  // the last SlotFree brings us back here
  }
  // Nothing uses the ring now and nothing can start to (a capture sees
  // kNone and asks for a new one). Unmap on the sender thread, then tell
  // the daemon, so its budget is freed only once the pages are.
  // Whoever drops the last reference (the sender thread, or CloseSender when
  // the link dies first) unregisters before unmapping.
  struct ReleasedRing {
    link::RingMapping mapping;
    std::function<void(uint8_t*, uint64_t)> on_unmap;
    ~ReleasedRing() {
      if (on_unmap && mapping.base() != nullptr) on_unmap(mapping.base(), mapping.layout().bytes());
    }
  };
  auto released = std::make_shared<ReleasedRing>();
  released->mapping = std::move(link->ring);
  released->on_unmap = std::move(link->on_unmap);
  link->on_unmap = nullptr;
  link->ring_state = internal::RingState::kNone;
  link->free_slots.clear();
  link->daemon_owns.clear();
  link::RingReleaseMsg msg;
  msg.reason = link->ring_revoked ? link::RingReleaseReason::kRevoked : link::RingReleaseReason::kIdle;
  link->ring_revoked = false;
  auto unmap = [released]() mutable { released.reset(); };
  (void)link->Send(msg, {}, std::move(unmap));
  released.reset();
  cv_.notify_all();
}

LinkStatus AgentLinkClient::OnRingGrant(const std::shared_ptr<Link>& link, Frame& frame) {
  link::RingGrantMsg msg;
  LinkStatus status = link::DecodeBody(frame, &msg);
  if (!status.ok()) return status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (link->ring_state != internal::RingState::kRequested) {
      return LinkStatus::Error("RingGrant that was not asked for");
    }
  }
  link::RingLayout layout{msg.slot_size, msg.slot_count};
  std::string error = msg.error;
  link::RingMapping mapping;
  if (error.empty()) {
    std::string bad = link::ValidateRingLayout(layout, link->chunk_size);
    if (!bad.empty()) error = "bad RingGrant: " + bad;
  }
  if (error.empty() && frame.fds.size() != 1) error = "RingGrant without a ring fd";
  if (error.empty()) {
    status = link::CheckRingFd(frame.fds[0].get(), layout);
    if (!status.ok()) error = status.message();
  }
  if (error.empty()) {
    LinkResult<link::RingMapping> m =
        link::RingMapping::Map(frame.fds[0].get(), layout, /*writable=*/true);
    if (m.ok()) {
      mapping = std::move(m).value();
    } else {
      error = m.error();
    }
  }
  // Registration (cudaHostRegister) can take seconds for a large ring; it
  // runs here, on the link thread, before any capture may use the ring.
  if (error.empty() && options_.on_ring_mapped) {
    options_.on_ring_mapped(mapping.base(), layout.bytes());
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!error.empty()) {
    link->ring_state = internal::RingState::kFailed;
    link->ring_error = error;
    last_error_ = "no capture ring: " + error;
  } else {
    link->layout = layout;
    link->ring = std::move(mapping);
    link->on_unmap = options_.on_ring_unmapping;
    for (uint32_t i = 0; i < layout.slot_count; ++i) link->free_slots.push_back(i);
    link->daemon_owns.assign(layout.slot_count, false);
    link->ring_state = internal::RingState::kReady;
  }
  cv_.notify_all();
  return LinkStatus::Ok();
}

std::optional<CaptureOutcome> AgentLinkClient::SettleAsyncLocked(const std::shared_ptr<Link>& link,
                                                                 std::string capture_id,
                                                                 std::string error) {
  CaptureOutcome o;
  o.token = link->current_token;
  o.capture_id = std::move(capture_id);
  o.error = std::move(error);
  o.seconds_after_end = std::chrono::duration<double>(Clock::now() - link->ended_at).count();
  link->ending_async = false;
  link->current_token = 0;
  link->result.reset();
  capture_active_ = false;
  last_outcome_ = o;
  MaybeReleaseRingLocked(link);
  cv_.notify_all();
  return o;
}

LinkStatus AgentLinkClient::HandleFrame(const std::shared_ptr<Link>& link, Frame& frame) {
  if (frame.type == MessageType::kRingGrant) return OnRingGrant(link, frame);
  if (!frame.fds.empty()) return LinkStatus::Error("unexpected file descriptors from daemon");
  switch (frame.type) {
    case MessageType::kArm: {
      link::ArmMsg arm;
      LinkStatus status = link::DecodeBody(frame, &arm);
      if (!status.ok()) return status;
      std::lock_guard<std::mutex> lock(mu_);
      AddArmLocked(arm);
      RecomputeArmedLocked();
      MaybeRequestRingLocked(link, /*force=*/false);
      cv_.notify_all();
      return LinkStatus::Ok();
    }
    case MessageType::kDisarm: {
      link::DisarmMsg msg;
      LinkStatus status = link::DecodeBody(frame, &msg);
      if (!status.ok()) return status;
      std::lock_guard<std::mutex> lock(mu_);
      std::erase_if(arms_, [&](const LocalArm& a) { return a.arm_id == msg.arm_id; });
      RecomputeArmedLocked();
      MaybeReleaseRingLocked(link);
      cv_.notify_all();
      return LinkStatus::Ok();
    }
    case MessageType::kRingRevoke: {
      link::RingRevokeMsg msg;
      LinkStatus status = link::DecodeBody(frame, &msg);
      if (!status.ok()) return status;
      std::lock_guard<std::mutex> lock(mu_);
      if (link->ring_state == internal::RingState::kReady) {
        link->ring_revoked = true;  // now, or once the capture in flight ends
        MaybeReleaseRingLocked(link);
      }
      return LinkStatus::Ok();
    }
    case MessageType::kSlotFree: {
      link::SlotFreeMsg msg;
      LinkStatus status = link::DecodeBody(frame, &msg);
      if (!status.ok()) return status;
      std::lock_guard<std::mutex> lock(mu_);
      if (msg.slot >= link->daemon_owns.size() || !link->daemon_owns[msg.slot]) {
        return LinkStatus::Error("SlotFree for slot " + std::to_string(msg.slot) +
                                 " the daemon does not hold");
      }
      link->daemon_owns[msg.slot] = false;
      link->free_slots.push_back(msg.slot);
      MaybeReleaseRingLocked(link);
      cv_.notify_all();
      return LinkStatus::Ok();
    }
    case MessageType::kCaptureResult: {
      link::CaptureResultMsg msg;
      LinkStatus status = link::DecodeBody(frame, &msg);
      if (!status.ok()) return status;
      std::optional<CaptureOutcome> outcome;
      {
        std::lock_guard<std::mutex> lock(mu_);
        // Results of abandoned (aborted) captures are dropped.
        if (msg.token == link->current_token && link->current_token != 0) {
          if (link->ending_async) {
            outcome = SettleAsyncLocked(link, msg.capture_id, msg.error);
          } else {
            link->result = msg;
          }
        }
        cv_.notify_all();
      }
      if (outcome && options_.on_capture_result) options_.on_capture_result(*outcome);
      return LinkStatus::Ok();
    }
    case MessageType::kKnownChunksAnswer: {
      if (!link->HasFeature(link::kFeatureChunkFingerprints)) {
        return LinkStatus::Error("KnownChunksAnswer without chunk_fingerprints");
      }
      link::KnownChunksAnswerMsg msg;
      LinkStatus status = link::DecodeBody(frame, &msg);
      if (!status.ok()) return status;
      std::lock_guard<std::mutex> lock(mu_);
      // Answers of abandoned queries (timed out, aborted capture) are dropped.
      if (msg.token == link->current_token && msg.query_id == link->pending_query &&
          msg.query_id != 0) {
        link->known_answer = frame.payload;
        link->known_error = msg.error;
        cv_.notify_all();
      }
      return LinkStatus::Ok();
    }
    case MessageType::kKernelsRequest: {
      if (!options_.list_kernels) {
        return LinkStatus::Error("KernelsRequest, but this agent did not offer kernel_census");
      }
      link::KernelsRequestMsg msg;
      LinkStatus status = link::DecodeBody(frame, &msg);
      if (!status.ok()) return status;
      std::vector<link::LoadedKernelInfo> kernels;
      try {
        kernels = options_.list_kernels();
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu_);
        last_error_ = std::string("listing kernels: ") + e.what();
      }
      return link->Send(KernelsReportPage(msg, std::move(kernels)));
    }
    case MessageType::kSampleStart: {
      if (options_.launch_sampler == nullptr) {
        return LinkStatus::Error("SampleStart, but this agent did not offer launch_sample");
      }
      link::SampleStartMsg msg;
      LinkStatus status = link::DecodeBody(frame, &msg);
      if (!status.ok()) return status;
      if (msg.sample_id == 0) return LinkStatus::Error("SampleStart with sample_id 0");
      // Clamped to kMaxSampleMs by the sampler.
      options_.launch_sampler->Start(
          msg.sample_id,
          std::chrono::milliseconds(std::min<uint64_t>(msg.duration_ms, link::kMaxSampleMs)));
      return LinkStatus::Ok();
    }
    case MessageType::kSampleStop: {
      if (options_.launch_sampler == nullptr) {
        return LinkStatus::Error("SampleStop, but this agent did not offer launch_sample");
      }
      link::SampleStopMsg msg;
      LinkStatus status = link::DecodeBody(frame, &msg);
      if (!status.ok()) return status;
      return link->Send(options_.launch_sampler->Stop(msg.sample_id));
    }
    case MessageType::kSubstitute: {
      if (!options_.on_substitute) {
        return LinkStatus::Error("Substitute, but this agent did not offer substitution");
      }
      link::SubstituteMsg msg;
      LinkStatus status = link::DecodeBody(frame, &msg);
      if (!status.ok()) return status;
      if (frame.payload.size() > link::kMaxSubstituteCodeObjectBytes) {
        status = LinkStatus::Error("the code object has " + std::to_string(frame.payload.size()) +
                                   " bytes, more than the " +
                                   std::to_string(link::kMaxSubstituteCodeObjectBytes) +
                                   " an agent accepts");
      } else {
        status = options_.on_substitute(msg, std::move(frame.payload));
      }
      if (!status.ok()) {
        link::SubstitutionReportMsg report;
        report.sub_id = msg.sub_id;
        report.state = link::SubstitutionState::kRefused;
        report.reason = status.message();
        return link->Send(report);
      }
      return LinkStatus::Ok();
    }
    case MessageType::kUnsubstitute: {
      if (!options_.on_substitute) {
        return LinkStatus::Error("Unsubstitute, but this agent did not offer substitution");
      }
      link::UnsubstituteMsg msg;
      LinkStatus status = link::DecodeBody(frame, &msg);
      if (!status.ok()) return status;
      if (options_.on_unsubstitute) options_.on_unsubstitute(msg);
      return LinkStatus::Ok();
    }
    case MessageType::kError: {
      link::ErrorMsg msg;
      (void)link::DecodeBody(frame, &msg);
      return LinkStatus::Error("daemon error: " + msg.message);
    }
    default:
      return LinkStatus::Error(std::string("unexpected ") + link::MessageTypeName(frame.type) +
                               " from daemon");
  }
}

void AgentLinkClient::AddArmLocked(const link::ArmMsg& msg) {
  const link::Selector selector = link::SelectorFromArm(msg);
  const int64_t rank = IdentityRank(options_.identity).rank;
  const std::string process_name = options_.identity.process_name.empty()
                                       ? link::ProcessName()
                                       : options_.identity.process_name;
  if (!link::MatchesProcess(selector, static_cast<uint32_t>(::getpid()), process_name, rank)) {
    return;
  }
  LinkResult<link::NameMatcher> matcher =
      link::NameMatcher::Compile(selector.kernel, selector.match);
  if (!matcher.ok()) {
    last_error_ = "ignoring arm " + msg.arm_id + ": " + matcher.error();
    return;
  }
  for (const LocalArm& a : arms_) {
    if (a.arm_id == msg.arm_id) return;
  }
  if (arms_.size() >= kMaxAgentArms) {
    last_error_ = "ignoring arm " + msg.arm_id + ": this agent already holds " +
                  std::to_string(arms_.size()) + " arms, the most it takes (kMaxAgentArms)";
    return;
  }
  // Keep arming order (ShouldCapture offers a dispatch oldest arm first),
  // whatever order pushes arrive in; seq 0 (older daemons) goes last.
  auto at = arms_.end();
  if (msg.seq != 0) {
    at = std::find_if(arms_.begin(), arms_.end(), [&](const LocalArm& a) {
      return a.seq == 0 || a.seq > msg.seq;
    });
  }
  auto added = arms_.insert(at, LocalArm{msg.arm_id, selector, std::move(matcher).value(),
                                         link::DispatchCounter(selector), msg.seq});
  added->local_id = next_local_arm_id_++;
  ++arm_generation_;
}

void AgentLinkClient::RecomputeArmedLocked() {
  const bool now = !arms_.empty();
  const bool was = armed_.exchange(now, std::memory_order_acq_rel);
  if (was != now && options_.on_armed_changed) options_.on_armed_changed();
}

std::optional<ArmMatch> AgentLinkClient::ShouldCapture(std::string_view demangled,
                                                       std::string_view mangled, int32_t device,
                                                       const link::LaunchShapeFn* shape) {
  if (!armed_.load(std::memory_order_acquire)) return std::nullopt;
  try {
    return ShouldCaptureSlow(demangled, mangled, device, shape);
  } catch (const std::exception&) {
    return std::nullopt;  // e.g. bad_alloc: never into the application
  }
}

std::vector<std::string> AgentLinkClient::ArmsMatching(std::string_view demangled,
                                                       std::string_view mangled, int32_t device) {
  std::vector<std::string> out;
  if (!armed_.load(std::memory_order_acquire)) return out;
  try {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = NowUnixMs();
    // Not counted, so nothing to replay: a kernel too costly to match here
    // is queued for the matcher thread and selects no arm until it is done.
    if (UncachedCostLocked(demangled, mangled, device, now) > options_.inline_match_budget) {
      bool queued = false;
      (void)QueueMatchLocked(demangled, mangled, &queued);
      return out;
    }
    for (LocalArm& arm : arms_) {
      if (link::IsExpired(arm.selector, now) || arm.counter.done()) continue;
      if (!link::MatchesDevice(arm.selector, device)) continue;
      if (arm.matcher.Matches(demangled, mangled)) out.push_back(arm.arm_id);
    }
  } catch (const std::exception&) {
    out.clear();  // never into the application
  }
  return out;
}

uint64_t AgentLinkClient::UncachedCostLocked(std::string_view demangled, std::string_view mangled,
                                             int32_t device, int64_t now) {
  uint64_t cost = 0;
  // An upper bound that costs no hashing of the name per arm: what matching
  // it against every live arm would cost uncached (a kernel's verdict covers
  // every arm, whatever its device).
  (void)device;
  for (const LocalArm& arm : arms_) {
    if (link::IsExpired(arm.selector, now) || arm.counter.done()) continue;
    cost += arm.matcher.MatchCost(demangled, mangled);
  }
  return cost;
}

bool AgentLinkClient::QueueMatchLocked(std::string_view demangled, std::string_view mangled,
                                       bool* queued) {
  *queued = false;
  std::string_view key = mangled.empty() ? demangled : mangled;
  if (pending_matches_.find(key) != pending_matches_.end()) return true;
  if (pending_matches_.size() >= kMaxPendingMatches) return false;
  if (match_thread_ == nullptr) {
    match_stop_ = false;
    try {
      match_thread_ = new std::thread([this] { MatchLoop(); });
    } catch (const std::exception&) {
      return false;
    }
  }
  PendingMatch& p = pending_matches_[std::string(key)];
  p.demangled = std::string(demangled);
  p.mangled = std::string(mangled);
  match_queue_.emplace_back(key);
  match_cv_.notify_all();
  *queued = true;
  return true;
}

void AgentLinkClient::MatchLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    match_cv_.wait(lock, [this] { return stop_ || !match_queue_.empty(); });
    if (stop_) return;
    const std::string key = std::move(match_queue_.front());
    match_queue_.pop_front();
    auto it = pending_matches_.find(key);
    if (it == pending_matches_.end()) continue;
    const std::string demangled = it->second.demangled;
    const std::string mangled = it->second.mangled;
    std::vector<std::pair<std::string, link::NameMatcher>> work;
    for (const LocalArm& arm : arms_) {
      if (!arm.matcher.Cached(demangled, mangled).has_value()) {
        work.emplace_back(arm.arm_id, arm.matcher.WithoutCache());
      }
    }
    lock.unlock();
    std::vector<char> answers(work.size());
    size_t answered = 0;
    for (; answered < work.size() && !match_stop_.load(); ++answered) {
      answers[answered] = work[answered].second.MatchUncachedBounded(demangled, mangled);
    }
    lock.lock();
    if (stop_ || answered < work.size()) return;  // stopping: nothing half-answered is kept
    for (size_t i = 0; i < work.size(); ++i) {
      for (LocalArm& arm : arms_) {
        if (arm.arm_id == work[i].first) arm.matcher.Remember(demangled, mangled, answers[i] != 0);
      }
    }
    it = pending_matches_.find(key);
    if (it == pending_matches_.end()) continue;
    // An arm that came meanwhile has no answer yet: another round.
    bool complete = true;
    for (const LocalArm& arm : arms_) {
      if (!arm.matcher.Cached(demangled, mangled).has_value()) complete = false;
    }
    if (!complete) {
      match_queue_.push_back(key);
      continue;
    }
    ++matches_off_thread_;
    std::vector<link::DispatchSkippedMsg> skips = ReplayMissedLocked(it->second);
    pending_matches_.erase(it);
    // The verdict, so later launches of this kernel cost one lookup.
    {
      KernelVerdict v;
      v.generation = arm_generation_;
      const int64_t now = NowUnixMs();
      for (LocalArm& arm : arms_) {
        if (link::IsExpired(arm.selector, now) || arm.counter.done()) continue;
        if (arm.matcher.Matches(demangled, mangled)) v.arms.push_back(arm.local_id);
      }
      if (verdicts_.size() >= kMaxVerdicts) verdicts_.clear();
      verdicts_.insert_or_assign(key, std::move(v));
    }
    std::shared_ptr<Link> link = link_;
    match_cv_.notify_all();
    if (!skips.empty()) {
      lock.unlock();
      if (link != nullptr && link->HasFeature(link::kFeatureDispatchSkipped)) {
        for (const link::DispatchSkippedMsg& m : skips) (void)link->Send(m);
      }
      lock.lock();
    }
  }
}

std::vector<link::DispatchSkippedMsg> AgentLinkClient::ReplayMissedLocked(const PendingMatch& p) {
  std::vector<link::DispatchSkippedMsg> skips;
  const int64_t now = NowUnixMs();
  const std::string why =
      "kerncap was still matching this kernel's name against the arms off the application's "
      "launching thread (matching it there would cost more than the agent's per-launch "
      "budget), so this dispatch ran uncaptured";
  for (int32_t device : p.missed) {
    for (LocalArm& arm : arms_) {
      if (link::IsExpired(arm.selector, now) || arm.counter.done()) continue;
      if (!link::MatchesDevice(arm.selector, device)) continue;
      if (!arm.matcher.Matches(p.demangled, p.mangled)) continue;  // cached now
      // The shape of a dispatch gone by is unknown: a per-shape arm lets it
      // pass, as it does any dispatch whose shape it cannot compute.
      if (std::optional<uint64_t> index = arm.counter.OnMatch(std::nullopt)) {
        link::DispatchSkippedMsg m;
        m.arm_id = arm.arm_id;
        m.dispatch_index = *index;
        m.kernel = p.demangled.empty() ? p.mangled : p.demangled;
        m.device = static_cast<uint32_t>(std::max(device, 0));
        m.reason = why;
        m.retried = arm.counter.GiveBack();
        skips.push_back(std::move(m));
        if (skips.size() > 64) break;
      }
      break;  // the first arm that matches counts it (arming order)
    }
  }
  if (p.missed_uncounted > 0) {
    last_error_ = std::to_string(p.missed_uncounted) + " dispatches of " +
                  (p.demangled.empty() ? p.mangled : p.demangled).substr(0, 256) +
                  " went uncaptured and uncounted while it was matched off the launching thread";
  }
  std::erase_if(arms_, [now](const LocalArm& a) {
    return a.counter.done() || link::IsExpired(a.selector, now);
  });
  RecomputeArmedLocked();
  MaybeReleaseRingLocked(link_);
  return skips;
}

uint64_t AgentLinkClient::matches_off_thread() const {
  std::lock_guard<std::mutex> lock(mu_);
  return matches_off_thread_;
}

uint64_t AgentLinkClient::dispatches_unevaluated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dispatches_unevaluated_;
}

std::optional<ArmMatch> AgentLinkClient::ShouldCaptureSlow(std::string_view demangled,
                                                           std::string_view mangled,
                                                           int32_t device,
                                                           const link::LaunchShapeFn* shape) {
  std::unique_lock<std::mutex> lock(mu_);
  std::optional<ArmMatch> result;
  int64_t now = NowUnixMs();
  const std::string_view key = mangled.empty() ? demangled : mangled;
  auto verdict = verdicts_.find(key);
  bool known = verdict != verdicts_.end() && verdict->second.generation == arm_generation_;
  // Bounded work on the launching thread: a kernel that costs too much to
  // match here is matched by the matcher thread (options.inline_match_budget).
  for (int round = 0; round < 2 && !known; ++round) {
    const bool pending = pending_matches_.find(key) != pending_matches_.end();
    if (!pending && UncachedCostLocked(demangled, mangled, device, now) <=
                        options_.inline_match_budget) {
      break;
    }
    bool queued = false;
    if (!QueueMatchLocked(demangled, mangled, &queued)) {
      ++dispatches_unevaluated_;  // the queue is full: uncaptured, uncounted
      return std::nullopt;
    }
    // Only the launch that found the kernel waits (briefly) for the answer.
    if (queued && options_.match_wait_us > 0) {
      match_cv_.wait_for(lock, std::chrono::microseconds(options_.match_wait_us), [&] {
        return stop_ || pending_matches_.find(key) == pending_matches_.end();
      });
    }
    auto it = pending_matches_.find(key);
    if (it != pending_matches_.end()) {
      ++dispatches_unevaluated_;
      if (it->second.missed.size() < kMaxMissedPerKernel) {
        it->second.missed.push_back(device);
      } else {
        ++it->second.missed_uncounted;
      }
      return std::nullopt;
    }
    // Answered in time: the matcher thread left the verdict.
    now = NowUnixMs();
    verdict = verdicts_.find(key);
    known = verdict != verdicts_.end() && verdict->second.generation == arm_generation_;
  }
  if (!known) {
    KernelVerdict v;
    v.generation = arm_generation_;
    for (LocalArm& arm : arms_) {
      if (link::IsExpired(arm.selector, now) || arm.counter.done()) continue;
      if (arm.matcher.Matches(demangled, mangled)) v.arms.push_back(arm.local_id);
    }
    if (demangled.size() <= link::kMaxKernelNameBytes && mangled.size() <= link::kMaxKernelNameBytes) {
      if (verdicts_.size() >= kMaxVerdicts) verdicts_.clear();
      verdict = verdicts_.insert_or_assign(std::string(key), std::move(v)).first;
    } else {
      verdict = verdicts_.end();  // over-long names match nothing and are not kept
    }
  }
  const std::vector<uint64_t> none;
  const std::vector<uint64_t>& selecting = verdict == verdicts_.end() ? none : verdict->second.arms;
  // Each mode's key is computed once per dispatch, and only if a per-shape
  // arm's pattern matches (it may read the arguments).
  std::optional<uint64_t> keys[3];
  bool computed[3] = {false, false, false};
  auto key_for = [&](link::PerShape mode) -> std::optional<uint64_t> {
    const int m = static_cast<int>(mode);
    if (m <= 0 || m > 2) return std::nullopt;
    if (!computed[m]) {
      computed[m] = true;
      if (shape != nullptr && *shape) keys[m] = (*shape)(mode);
    }
    return keys[m];
  };
  // Arms are considered in arming order; a dispatch is taken by at most one
  // arm, and arms after it do not count it.
  for (LocalArm& arm : arms_) {
    if (link::IsExpired(arm.selector, now) || arm.counter.done()) continue;
    if (!link::MatchesDevice(arm.selector, device)) continue;
    if (std::find(selecting.begin(), selecting.end(), arm.local_id) == selecting.end()) continue;
    std::optional<uint64_t> shape_key;
    if (arm.counter.per_shape()) shape_key = key_for(arm.selector.per_shape);
    if (std::optional<uint64_t> index = arm.counter.OnMatch(shape_key)) {
      // shape_key is set only for per-shape arms.
      result = ArmMatch{arm.arm_id, *index, shape_key ? link::LaunchShapeKeyText(*shape_key) : ""};
      if (arm.counter.done()) last_taken_ = arm;
      break;
    }
  }
  std::erase_if(arms_, [now](const LocalArm& a) {
    return a.counter.done() || link::IsExpired(a.selector, now);
  });
  RecomputeArmedLocked();
  return result;
}

LinkResult<std::unique_ptr<CaptureSession>> AgentLinkClient::BeginCapture(
    link::CaptureBeginMsg begin, std::string_view argument_blob, int timeout_ms) {
  try {
    return BeginCaptureImpl(std::move(begin), argument_blob, timeout_ms);
  } catch (const std::exception& e) {
    return LinkStatus::Error(std::string("BeginCapture: ") + e.what());
  }
}

LinkResult<std::unique_ptr<CaptureSession>> AgentLinkClient::BeginCaptureImpl(
    link::CaptureBeginMsg begin, std::string_view argument_blob, int timeout_ms) {
  std::shared_ptr<Link> link;
  {
    std::unique_lock<std::mutex> lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    auto settled = [this] {
      return link_ == nullptr || (!capture_active_ && link_->ring_state != internal::RingState::kRequested);
    };
    MaybeRequestRingLocked(link_, /*force=*/true);
    bool ok = cv_.wait_until(lock, deadline, settled);
    // The previous capture's end may have released the ring (its arm was the
    // last one, and this dispatch's arm was already taken when it was
    // selected): ask again and wait for that grant too.
    while (ok && link_ != nullptr && link_->ring_state == internal::RingState::kNone) {
      MaybeRequestRingLocked(link_, /*force=*/true);
      if (link_->ring_state == internal::RingState::kNone) break;  // the request was not sent
      ok = cv_.wait_until(lock, deadline, settled);
    }
    if (link_ == nullptr) return LinkStatus::Error("not connected to kerncapd");
    if (!ok) {
      return LinkStatus::Error(capture_active_ ? "timed out waiting for the previous capture"
                                               : "timed out waiting for kerncapd's capture ring");
    }
    if (link_->ring_state != internal::RingState::kReady) {
      return LinkStatus::Error("no capture ring from kerncapd: " +
                               (link_->ring_error.empty() ? std::string("not granted")
                                                          : link_->ring_error));
    }
    link = link_;
    capture_active_ = true;
    begin.token = ++next_token_;
    link->current_token = begin.token;
    link->result.reset();
  }
  std::unique_ptr<CaptureSession> session(new CaptureSession(this, link, begin.token));
  LinkStatus status = link->Send(begin, argument_blob);
  if (!status.ok()) {
    session->finished_ = true;
    session->Finish();
    return LinkStatus::Error("sending CaptureBegin: " + status.message());
  }
  return session;
}

bool AgentLinkClient::connected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return link_ != nullptr;
}

std::string AgentLinkClient::agent_id() const {
  std::lock_guard<std::mutex> lock(mu_);
  return link_ ? link_->agent_id : std::string();
}

uint64_t AgentLinkClient::connection_generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

bool AgentLinkClient::WaitConnected(uint64_t after_generation, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] {
    return generation_ > after_generation && link_ != nullptr;
  });
}

bool AgentLinkClient::WaitArms(size_t n, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [&] { return arms_.size() >= n; });
}

size_t AgentLinkClient::active_arms() const {
  std::lock_guard<std::mutex> lock(mu_);
  return arms_.size();
}

std::string AgentLinkClient::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

bool AgentLinkClient::ReportSkipped(link::DispatchSkippedMsg msg, bool give_back) {
  std::shared_ptr<Link> link;
  {
    std::lock_guard<std::mutex> lock(mu_);
    msg.retried = false;
    if (give_back) {
      LocalArm* arm = nullptr;
      for (LocalArm& a : arms_) {
        if (a.arm_id == msg.arm_id) arm = &a;
      }
      if (arm == nullptr && last_taken_ && last_taken_->arm_id == msg.arm_id &&
          !link::IsExpired(last_taken_->selector, NowUnixMs())) {
        arms_.push_back(std::move(*last_taken_));
        arm = &arms_.back();
      }
      if (arm != nullptr) {
        msg.retried = arm->counter.GiveBack();
        if (arm->counter.done()) {
          std::erase_if(arms_, [&](const LocalArm& a) { return a.arm_id == msg.arm_id; });
        }
      }
      RecomputeArmedLocked();
    }
    last_taken_.reset();
    link = link_;
    MaybeReleaseRingLocked(link);
  }
  if (link != nullptr && link->HasFeature(link::kFeatureDispatchSkipped)) (void)link->Send(msg);
  return msg.retried;
}

bool AgentLinkClient::FlushOutgoing(int timeout_ms) {
  std::shared_ptr<Link> link;
  {
    std::lock_guard<std::mutex> lock(mu_);
    link = link_;
  }
  return link == nullptr || link->Flush(timeout_ms);
}

bool AgentLinkClient::WaitCaptureSettled(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [this] { return !capture_active_; });
}

std::optional<CaptureOutcome> AgentLinkClient::last_capture_outcome() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_outcome_;
}

uint64_t AgentLinkClient::ring_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (link_ == nullptr || link_->ring_state != internal::RingState::kReady) return 0;
  return link_->layout.bytes();
}

// ---------------------------------------------------------------------------
// Fork handling. prepare: take every client's lock so the child inherits
// consistent state; parent: release; child: the background thread does not
// exist there, so rebuild the locks, drop (leak) the parent's connection,
// detach the child from the shared ring, and reconnect as a new agent.

void AgentLinkClient::ForkPrepare() {
  g_clients_mu->lock();
  for (AgentLinkClient* c : *g_clients) c->mu_.lock();
}

void AgentLinkClient::ForkParent() {
  for (AgentLinkClient* c : *g_clients) c->mu_.unlock();
  g_clients_mu->unlock();
}

void AgentLinkClient::ForkChild() {
  for (AgentLinkClient* c : *g_clients) c->ResetInChild();
  g_clients_mu->unlock();
}

void AgentLinkClient::ResetInChild() {
  // Locks and condition variables may reference threads that do not exist in
  // the child; start over with fresh ones (the old ones are abandoned).
  new (&mu_) std::mutex();
  new (&cv_) std::condition_variable();
  thread_ = nullptr;  // the parent's thread object is intentionally leaked
  if (link_ != nullptr) {
    std::shared_ptr<Link>* leaked = new std::shared_ptr<Link>(std::move(link_));
    Link& old = **leaked;
    ::close(old.fd.release());  // our copy only; the parent's link is untouched
    // Replace the shared ring with private memory at the same address: a
    // session in the forking thread keeps valid pointers but can no longer
    // scribble over the parent's slots.
    if (old.ring.base() != nullptr) {
      ::mmap(old.ring.base(), old.ring.layout().bytes(), PROT_READ | PROT_WRITE,
             MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    }
    old.alive = false;
    old.on_unmap = nullptr;  // the registration belongs to the parent
    // The sender thread does not exist here; its lock may have been held.
    new (&old.out_mu) std::mutex();
    new (&old.out_cv) std::condition_variable();
    old.out_closed = true;
    old.outq.clear();
  }
  link_ = nullptr;
  connecting_fd_ = -1;  // the parent's handshake, not ours
  arms_.clear();
  last_taken_.reset();
  new (&match_cv_) std::condition_variable();
  verdicts_.clear();
  match_thread_ = nullptr;  // the parent's matcher thread is intentionally leaked
  pending_matches_.clear();
  match_queue_.clear();
  armed_.store(false, std::memory_order_release);
  capture_active_ = false;
  first_attempt_done_ = false;
  if (started_ && !stop_) StartThreadLocked();
}

}  // namespace kerncap::agent
