// client_link.h: one handshaken connection of the agent-link client to
// kerncapd (agent_link_client.h): the socket, the sender thread that writes
// outgoing frames in order, the ring mapping and its slots, and the state of
// the capture in flight on it. Shared by the client's reader thread and a
// capture session (capture_session.h), so a session keeps valid slot memory
// even if the link dies under it. Internal to agent/link.
#ifndef KERNCAP_AGENT_LINK_CLIENT_LINK_H_
#define KERNCAP_AGENT_LINK_CLIENT_LINK_H_

#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/agent_link/messages.h"
#include "common/agent_link/result.h"
#include "common/agent_link/ring.h"
#include "common/agent_link/wire.h"

namespace kerncap::agent {

using link::LinkStatus;

namespace internal {

enum class RingState { kNone, kRequested, kReady, kFailed };

// Mutable state is guarded by the owning client's mu_ unless noted.
struct ClientLink {
  using Clock = std::chrono::steady_clock;

  link::UniqueFd fd;
  std::string agent_id;
  link::RingLayout layout;  // set before ring_state turns kReady
  uint64_t chunk_size = 0;
  uint64_t max_payload = 0;  // 0: unknown (no check)
  std::vector<std::string> daemon_features;
  link::RingMapping ring;
  std::mutex send_mu;  // serializes frame writers (sender thread, SendNow)

  // Guarded by AgentLinkClient::mu_.
  bool alive = true;
  RingState ring_state = RingState::kReady;
  std::string ring_error;
  bool ring_revoked = false;  // the daemon asked for the ring back
  std::deque<uint32_t> free_slots;
  std::vector<bool> daemon_owns;
  uint64_t current_token = 0;  // capture in flight, 0 when none
  std::optional<link::CaptureResultMsg> result;
  bool ending_async = false;  // current_token ended with EndAsync
  // "chunk_fingerprints": the KnownChunksQuery a session waits for, and its
  // answer (one byte per fingerprint) once the reader thread has it.
  uint64_t pending_query = 0;
  std::optional<std::string> known_answer;
  std::string known_error;
  Clock::time_point ended_at;

  // Outgoing frames, written in order by the sender thread (guarded by
  // out_mu, a leaf lock).
  struct OutFrame {
    link::MessageType type;
    std::string json;
    std::string payload;
    // Runs on the sender thread just before the frame is written (a ring
    // release unmaps there, off the application's threads).
    std::function<void()> before;
  };
  std::mutex out_mu;
  std::condition_variable out_cv;
  std::deque<OutFrame> outq;
  bool writing = false;
  bool out_closed = false;
  std::thread sender;

  std::function<void(uint8_t*, uint64_t)> on_unmap;
  ~ClientLink() {
    CloseSender();
    if (on_unmap && ring.base() != nullptr) on_unmap(ring.base(), ring.layout().bytes());
  }

  bool HasFeature(std::string_view f) const { return link::HasFeature(daemon_features, f); }

  void StartSender() {
    sender = std::thread([this] { SenderLoop(); });
  }
  void CloseSender() {
    {
      std::lock_guard<std::mutex> lock(out_mu);
      out_closed = true;
      outq.clear();
      out_cv.notify_all();
    }
    if (sender.joinable() && sender.get_id() != std::this_thread::get_id()) sender.join();
  }
  void SenderLoop() {
    std::unique_lock<std::mutex> lock(out_mu);
    while (true) {
      out_cv.wait(lock, [this] { return out_closed || !outq.empty(); });
      if (out_closed) return;
      OutFrame f = std::move(outq.front());
      outq.pop_front();
      writing = true;
      lock.unlock();
      if (f.before) f.before();
      LinkStatus status;
      {
        std::lock_guard<std::mutex> send_lock(send_mu);
        status = link::SendFrame(fd.get(), f.type, f.json, f.payload);
      }
      // A half-written frame desynchronizes the stream: drop the link (the
      // reader thread then sees EOF and cleans up).
      if (!status.ok()) ::shutdown(fd.get(), SHUT_RDWR);
      lock.lock();
      writing = false;
      if (!status.ok()) {
        out_closed = true;
        outq.clear();
      }
      out_cv.notify_all();
    }
  }
  // Waits until everything queued so far is written (or the link closed).
  bool Flush(int timeout_ms) {
    std::unique_lock<std::mutex> lock(out_mu);
    return out_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [this] { return out_closed || (outq.empty() && !writing); });
  }

  // Queues a frame for the sender thread. Fails only when the link is gone.
  template <typename M>
  LinkStatus Send(const M& msg, std::string_view payload = {},
                  std::function<void()> before = nullptr) {
    OutFrame f;
    f.type = M::kType;
    f.before = std::move(before);
    try {
      f.json = link::EncodeBody(msg);
      f.payload.assign(payload.data(), payload.size());
    } catch (const std::exception& e) {
      return LinkStatus::Error(std::string("encoding ") + link::MessageTypeName(M::kType) + ": " +
                               e.what());
    }
    std::lock_guard<std::mutex> lock(out_mu);
    if (out_closed) return LinkStatus::Error("connection to kerncapd lost");
    outq.push_back(std::move(f));
    out_cv.notify_all();
    return LinkStatus::Ok();
  }
  // Writes a frame directly (handshake, before the sender runs; last words).
  template <typename M>
  LinkStatus SendNow(const M& msg) {
    std::lock_guard<std::mutex> lock(send_mu);
    LinkStatus status = link::SendMessage(fd.get(), msg);
    if (!status.ok()) ::shutdown(fd.get(), SHUT_RDWR);
    return status;
  }
};

}  // namespace internal

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_LINK_CLIENT_LINK_H_
