#include "agent/link/capture_session.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <utility>

#include "agent/link/agent_link_client.h"
#include "agent/link/client_link.h"

namespace kerncap::agent {

using Clock = std::chrono::steady_clock;

CaptureSession::CaptureSession(AgentLinkClient* client, std::shared_ptr<internal::ClientLink> link,
                               uint64_t token)
    : client_(client), link_(std::move(link)), token_(token) {}

CaptureSession::~CaptureSession() {
  if (!finished_) Abort("capture session dropped");
}

uint64_t CaptureSession::chunk_size() const { return link_->chunk_size; }
uint64_t CaptureSession::slot_size() const { return link_->layout.slot_size; }

LinkStatus CaptureSession::CheckUsable() {
  if (finished_) return LinkStatus::Error("capture session already ended");
  std::lock_guard<std::mutex> lock(client_->mu_);
  if (!link_->alive) return LinkStatus::Error("connection to kerncapd lost");
  if (link_->result.has_value() && !link_->result->error.empty()) {
    return LinkStatus::Error("daemon failed the capture: " + link_->result->error);
  }
  return LinkStatus::Ok();
}

LinkResult<uint32_t> CaptureSession::AddRegion(link::RegionBeginMsg region) {
  LinkStatus status = CheckUsable();
  if (!status.ok()) return status;
  region.token = token_;
  region.region = regions_;
  status = link_->Send(region);
  if (!status.ok()) return status;
  return regions_++;
}

LinkResult<CaptureSession::Slot> CaptureSession::AcquireSlot(int timeout_ms) {
  if (finished_) return LinkStatus::Error("capture session already ended");
  std::unique_lock<std::mutex> lock(client_->mu_);
  auto ready = [this] {
    return !link_->free_slots.empty() || !link_->alive ||
           (link_->result.has_value() && !link_->result->error.empty());
  };
  if (timeout_ms < 0) {
    client_->cv_.wait(lock, ready);
  } else if (!client_->cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready)) {
    return LinkStatus::Error("timed out waiting for a free ring slot");
  }
  if (!link_->alive) return LinkStatus::Error("connection to kerncapd lost");
  if (link_->result.has_value() && !link_->result->error.empty()) {
    return LinkStatus::Error("daemon failed the capture: " + link_->result->error);
  }
  Slot slot;
  slot.index = link_->free_slots.front();
  link_->free_slots.pop_front();
  slot.data = link_->ring.slot(slot.index);
  slot.capacity = link_->layout.slot_size;
  return slot;
}

void CaptureSession::ReturnSlot(const Slot& slot) {
  std::lock_guard<std::mutex> lock(client_->mu_);
  link_->free_slots.push_front(slot.index);
  client_->cv_.notify_all();
}

LinkStatus CaptureSession::SubmitSlot(const Slot& slot, uint32_t region, uint64_t offset,
                                      uint64_t length) {
  LinkStatus status = CheckUsable();
  if (!status.ok()) {
    ReturnSlot(slot);
    return status;
  }
  if (slot.index >= link_->layout.slot_count || length == 0 || length > slot.capacity) {
    ReturnSlot(slot);
    return LinkStatus::Error("invalid slot submission");
  }
  {
    std::lock_guard<std::mutex> lock(client_->mu_);
    link_->daemon_owns[slot.index] = true;
  }
  link::SlotFilledMsg msg;
  msg.token = token_;
  msg.slot = slot.index;
  msg.region = region;
  msg.offset = offset;
  msg.length = length;
  return link_->Send(msg);
}

bool CaptureSession::unchanged_supported() const {
  return link_->HasFeature(link::kFeaturePostUnchanged);
}

LinkStatus CaptureSession::MarkUnchanged(uint32_t region, uint64_t first_chunk, uint64_t count) {
  LinkStatus status = CheckUsable();
  if (!status.ok()) return status;
  if (!unchanged_supported()) {
    return LinkStatus::Error("kerncapd does not take unchanged chunks (post_unchanged)");
  }
  link::ChunksUnchangedMsg msg;
  msg.token = token_;
  msg.region = region;
  msg.first_chunk = first_chunk;
  msg.chunk_count = count;
  return link_->Send(msg);
}

bool CaptureSession::fingerprints_supported() const {
  return link_->HasFeature(link::kFeatureChunkFingerprints);
}

LinkResult<std::vector<uint8_t>> CaptureSession::QueryKnown(
    const std::vector<link::ChunkFingerprint>& fps, int timeout_ms) {
  if (!fingerprints_supported()) {
    return LinkStatus::Error("kerncapd does not take fingerprints (chunk_fingerprints)");
  }
  std::vector<uint8_t> held;
  held.reserve(fps.size());
  for (size_t at = 0; at < fps.size(); at += link::kMaxFingerprintsPerFrame) {
    LinkStatus status = CheckUsable();
    if (!status.ok()) return status;
    const size_t n = std::min(link::kMaxFingerprintsPerFrame, fps.size() - at);
    link::KnownChunksQueryMsg msg;
    msg.token = token_;
    msg.query_id = ++next_query_;
    {
      std::lock_guard<std::mutex> lock(client_->mu_);
      link_->pending_query = msg.query_id;
      link_->known_answer.reset();
      link_->known_error.clear();
    }
    status = link_->Send(msg, link::EncodeFingerprints(std::vector<link::ChunkFingerprint>(
                                  fps.begin() + at, fps.begin() + at + n)));
    if (!status.ok()) return status;
    std::unique_lock<std::mutex> lock(client_->mu_);
    const bool answered =
        client_->cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] {
          return link_->known_answer.has_value() || !link_->alive ||
                 (link_->result.has_value() && !link_->result->error.empty());
        });
    link_->pending_query = 0;
    if (!answered) return LinkStatus::Error("kerncapd did not answer which chunks it holds");
    if (!link_->known_answer.has_value()) {
      return LinkStatus::Error(link_->alive ? "daemon failed the capture"
                                            : "connection to kerncapd lost");
    }
    if (!link_->known_error.empty()) return LinkStatus::Error(link_->known_error);
    const std::string& answer = *link_->known_answer;
    if (answer.size() != n) {
      return LinkStatus::Error("kerncapd answered " + std::to_string(answer.size()) + " of " +
                               std::to_string(n) + " fingerprints");
    }
    for (char c : answer) held.push_back(c == 1 ? 1 : 0);
    link_->known_answer.reset();
  }
  return held;
}

template <typename Msg>
LinkStatus CaptureSession::SendFingerprintRanges(uint32_t region, uint64_t first_chunk,
                                                 const std::vector<link::ChunkFingerprint>& fps) {
  if (!fingerprints_supported()) {
    return LinkStatus::Error("kerncapd does not take fingerprints (chunk_fingerprints)");
  }
  for (size_t at = 0; at < fps.size(); at += link::kMaxFingerprintsPerFrame) {
    LinkStatus status = CheckUsable();
    if (!status.ok()) return status;
    const size_t n = std::min(link::kMaxFingerprintsPerFrame, fps.size() - at);
    Msg msg;
    msg.token = token_;
    msg.region = region;
    msg.first_chunk = first_chunk + at;
    msg.chunk_count = n;
    status = link_->Send(msg, link::EncodeFingerprints(std::vector<link::ChunkFingerprint>(
                                  fps.begin() + at, fps.begin() + at + n)));
    if (!status.ok()) return status;
  }
  return LinkStatus::Ok();
}

LinkStatus CaptureSession::MarkKnown(uint32_t region, uint64_t first_chunk,
                                     const std::vector<link::ChunkFingerprint>& fps) {
  return SendFingerprintRanges<link::ChunksKnownMsg>(region, first_chunk, fps);
}

LinkStatus CaptureSession::TellFingerprints(uint32_t region, uint64_t first_chunk,
                                            const std::vector<link::ChunkFingerprint>& fps) {
  return SendFingerprintRanges<link::ChunkFingerprintsMsg>(region, first_chunk, fps);
}

LinkStatus CaptureSession::WriteRegion(uint32_t region, const void* data, uint64_t size) {
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  uint64_t step = slot_size();
  for (uint64_t offset = 0; offset < size; offset += step) {
    LinkResult<Slot> slot = AcquireSlot();
    if (!slot.ok()) return slot.status();
    uint64_t n = std::min(step, size - offset);
    std::memcpy(slot->data, bytes + offset, n);
    LinkStatus status = SubmitSlot(*slot, region, offset, n);
    if (!status.ok()) return status;
  }
  return LinkStatus::Ok();
}

LinkStatus CaptureSession::AddCodeObject(link::CodeObjectFormat format, const std::string& name,
                                         const void* data, size_t size) {
  LinkStatus status = CheckUsable();
  if (!status.ok()) return status;
  if (link_->max_payload != 0 && size > link_->max_payload) {
    return LinkStatus::Error("code object of " + std::to_string(size) +
                             " bytes exceeds the daemon's limit of " +
                             std::to_string(link_->max_payload));
  }
  link::CodeObjectMsg msg;
  msg.token = token_;
  msg.format = format;
  msg.name = name;
  return link_->Send(msg, std::string_view(static_cast<const char*>(data), size));
}

LinkResult<std::string> CaptureSession::End(bool post_complete, int timeout_ms) {
  if (finished_) return LinkStatus::Error("capture session already ended");
  link::CaptureEndMsg msg;
  msg.token = token_;
  msg.post_complete = post_complete;
  msg.timing = timing_;
  LinkStatus status = link_->Send(msg);
  std::optional<link::CaptureResultMsg> result;
  {
    std::unique_lock<std::mutex> lock(client_->mu_);
    client_->cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                          [this] { return link_->result.has_value() || !link_->alive; });
    result = link_->result;
  }
  finished_ = true;
  Finish();
  if (result.has_value()) {
    if (!result->error.empty()) return LinkStatus::Error(result->error);
    return result->capture_id;
  }
  if (!status.ok()) return LinkStatus::Error("sending CaptureEnd: " + status.message());
  return LinkStatus::Error("no capture result from kerncapd (connection lost or timed out)");
}

LinkStatus CaptureSession::EndAsync(bool post_complete) {
  if (finished_) return LinkStatus::Error("capture session already ended");
  finished_ = true;
  link::CaptureEndMsg msg;
  msg.token = token_;
  msg.post_complete = post_complete;
  msg.timing = timing_;
  std::optional<CaptureOutcome> outcome;
  LinkStatus status;
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(client_->mu_);
    status = link_->Send(msg);
    queued = status.ok() && link_->alive && link_->current_token == token_;
    if (queued) {
      link_->ending_async = true;
      link_->ended_at = Clock::now();
      if (link_->result.has_value()) {
        // The daemon failed the capture early; its verdict is already here.
        outcome =
            client_->SettleAsyncLocked(link_, link_->result->capture_id, link_->result->error);
      }
    }
  }
  if (outcome) {
    if (client_->options_.on_capture_result) client_->options_.on_capture_result(*outcome);
    if (!outcome->error.empty()) return LinkStatus::Error(outcome->error);
    return LinkStatus::Ok();
  }
  if (!queued) {
    // Nothing will settle it: free the client for the next capture.
    Finish();
    if (!status.ok()) return LinkStatus::Error("sending CaptureEnd: " + status.message());
    return LinkStatus::Error("connection to kerncapd lost");
  }
  return LinkStatus::Ok();
}

void CaptureSession::Abort(const std::string& reason) {
  if (finished_) return;
  finished_ = true;
  link::CaptureAbortMsg msg;
  msg.token = token_;
  msg.reason = reason;
  (void)link_->Send(msg);
  Finish();
}

void CaptureSession::Finish() {
  std::lock_guard<std::mutex> lock(client_->mu_);
  link_->current_token = 0;
  link_->result.reset();
  client_->capture_active_ = false;
  client_->MaybeReleaseRingLocked(link_);
  client_->cv_.notify_all();
}

}  // namespace kerncap::agent
