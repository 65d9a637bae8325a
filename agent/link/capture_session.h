// capture_session.h: one capture in flight on the agent link, the client's
// other half (agent_link_client.h holds the connection: handshake, arms,
// reconnects). A session declares regions, fills ring slots and hands them
// to the daemon, and ends with the daemon's verdict (End) or without waiting
// for it (EndAsync). It works on the connection it began on
// (client_link.h) and takes the client's lock for the state they share.
#ifndef KERNCAP_AGENT_LINK_CAPTURE_SESSION_H_
#define KERNCAP_AGENT_LINK_CAPTURE_SESSION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/agent_link/chunk_fingerprint.h"
#include "common/agent_link/messages.h"
#include "common/agent_link/result.h"

namespace kerncap::agent {

using link::LinkResult;
using link::LinkStatus;

class AgentLinkClient;
namespace internal {
struct ClientLink;  // one live connection (client_link.h)
}  // namespace internal

// One capture in flight. Obtained from AgentLinkClient::BeginCapture; ends
// with End() or Abort() (the destructor aborts a session that did neither).
class CaptureSession {
 public:
  struct Slot {
    uint32_t index = 0;
    uint8_t* data = nullptr;  // slot memory, valid until submitted
    uint64_t capacity = 0;    // == slot_size()
  };

  ~CaptureSession();
  CaptureSession(const CaptureSession&) = delete;
  CaptureSession& operator=(const CaptureSession&) = delete;

  uint64_t token() const { return token_; }
  uint64_t chunk_size() const;
  uint64_t slot_size() const;

  // Declares a region (image "pre" or "post"; region.token/region.region are
  // filled in). Returns its index for SubmitSlot. All pre regions first.
  LinkResult<uint32_t> AddRegion(link::RegionBeginMsg region);
  // Waits for a free ring slot (timeout_ms < 0: no limit). Fails if the
  // daemon is gone or has already failed this capture.
  LinkResult<Slot> AcquireSlot(int timeout_ms = -1);
  // Hands `length` bytes at the start of `slot` to the daemon as bytes
  // [offset, offset+length) of `region`. offset must be a multiple of
  // chunk_size(), and length too unless it reaches the end of the region.
  LinkStatus SubmitSlot(const Slot& slot, uint32_t region, uint64_t offset, uint64_t length);
  // Gives back a slot that was acquired but not submitted.
  void ReturnSlot(const Slot& slot);
  // True when the daemon takes MarkUnchanged ("post_unchanged").
  bool unchanged_supported() const;
  // Chunks [first_chunk, +count) of post `region` are the same as the pre
  // image's (ChunksUnchanged, messages.h); fails when the daemon does not
  // speak "post_unchanged".
  LinkStatus MarkUnchanged(uint32_t region, uint64_t first_chunk, uint64_t count);
  // "chunk_fingerprints" (messages.h): whether the daemon speaks it; which
  // of `fps` it holds from this connection's earlier captures (one byte per
  // fingerprint, 1: held; waits at most timeout_ms for each page); chunks
  // [first_chunk, +fps.size()) of `region` named by fingerprint instead of
  // sent (only ones the answer said are held); the fingerprints of chunks
  // sent as bytes, for the daemon to remember.
  bool fingerprints_supported() const;
  LinkResult<std::vector<uint8_t>> QueryKnown(const std::vector<link::ChunkFingerprint>& fps,
                                              int timeout_ms = 5000);
  LinkStatus MarkKnown(uint32_t region, uint64_t first_chunk,
                       const std::vector<link::ChunkFingerprint>& fps);
  LinkStatus TellFingerprints(uint32_t region, uint64_t first_chunk,
                              const std::vector<link::ChunkFingerprint>& fps);
  // Sent with the CaptureEnd (the manifest's agent_timing).
  void SetTiming(const link::CaptureTimingInfo& timing) { timing_ = timing; }
  // Convenience for host-resident data: copies `size` bytes into slots and
  // submits them as the whole of `region`.
  LinkStatus WriteRegion(uint32_t region, const void* data, uint64_t size);
  LinkStatus AddCodeObject(link::CodeObjectFormat format, const std::string& name, const void* data,
                           size_t size);
  // Ends the capture and waits for the daemon's verdict: the capture id, or
  // the reason it failed.
  LinkResult<std::string> End(bool post_complete = true, int timeout_ms = 120000);
  // Ends the capture without waiting: returns once CaptureEnd is queued (all
  // slots were submitted before, so every byte is already in the ring). The
  // verdict goes to options.on_capture_result; the client's next
  // BeginCapture waits for it.
  LinkStatus EndAsync(bool post_complete = true);
  void Abort(const std::string& reason);

 private:
  friend class AgentLinkClient;
  CaptureSession(AgentLinkClient* client, std::shared_ptr<internal::ClientLink> link,
                 uint64_t token);
  LinkStatus CheckUsable();
  // ChunksKnown or ChunkFingerprints, in pages of kMaxFingerprintsPerFrame.
  template <typename Msg>
  LinkStatus SendFingerprintRanges(uint32_t region, uint64_t first_chunk,
                                   const std::vector<link::ChunkFingerprint>& fps);
  void Finish();

  AgentLinkClient* client_;
  std::shared_ptr<internal::ClientLink> link_;
  uint64_t token_;
  uint32_t regions_ = 0;
  uint64_t next_query_ = 0;
  bool finished_ = false;
  link::CaptureTimingInfo timing_;
};

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_LINK_CAPTURE_SESSION_H_
