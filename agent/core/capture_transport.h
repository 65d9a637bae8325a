// capture_transport.h: what the capture core needs from the link to kerncapd.
// The production implementation adapts AgentLinkClient (agent/link); tests
// use FakeTransport. Keeping this seam small lets the core be tested without
// sockets, shared memory or a daemon.
//
// Life of one capture session (all calls from the capturing thread):
//   auto s = transport.Begin(header, arg_blob);
//   int r = s->AddRegion(ImageKind::kPre, region);
//   Slot slot; s->AcquireSlot(&slot);   // blocks for a free ring slot
//   memcpy(slot.data, ..., n);          // or a device-to-host copy into it
//   s->SubmitSlot(slot, r, offset, n);  // offset: multiple of slot capacity
//   s->AddCodeObject(code);
//   s->End(post_complete);              // or Abort(reason) at any point
#ifndef KERNCAP_AGENT_CORE_CAPTURE_TRANSPORT_H_
#define KERNCAP_AGENT_CORE_CAPTURE_TRANSPORT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/core/capture_types.h"
#include "agent/core/status.h"
#include "common/agent_link/chunk_fingerprint.h"

namespace kerncap::agent {

// How a capture read the memory and how long each part took (sent with
// the End; the manifest's agent_timing).
struct CaptureTiming {
  CapturePath path = CapturePath::kUnspecified;
  std::string path_reason;
  double quiesce_seconds = 0;
  double pre_seconds = 0;
  double post_seconds = 0;
  double held_seconds = 0;
  double drain_seconds = 0;
  uint64_t pcie_bytes = 0;
  uint64_t unchanged_post_bytes = 0;
  double fingerprint_seconds = 0;
};

using link::ChunkFingerprint;

// A ring slot the capturer fills. `data` stays valid until submitted.
struct Slot {
  int index = -1;
  void* data = nullptr;
  size_t capacity = 0;
};

class TransportSession {
 public:
  virtual ~TransportSession() = default;
  // Declares a region of the pre- or post-dispatch image; returns its handle.
  virtual Result<int> AddRegion(ImageKind image, const RegionDesc& region) = 0;
  virtual Status AcquireSlot(Slot* slot) = 0;
  // Hands `length` bytes of `slot` over as region bytes [offset, offset+length).
  virtual Status SubmitSlot(const Slot& slot, int region, uint64_t offset, size_t length) = 0;
  // Gives back a slot that was acquired but will not be submitted.
  virtual void ReturnSlot(const Slot& slot) = 0;
  virtual Status AddCodeObject(const CodeObjectRef& code) = 0;
  // The daemon's chunk size when it takes MarkUnchanged, else 0.
  virtual uint64_t UnchangedChunkSize() const { return 0; }
  // Chunks [first_chunk, +count) (of UnchangedChunkSize() bytes) of post
  // region `region` equal the pre image's at the same va: the daemon takes
  // them from the pre image it holds instead of receiving them again.
  virtual Status MarkUnchanged(int /*region*/, uint64_t /*first_chunk*/, uint64_t /*count*/) {
    return Error("this transport takes every post chunk's bytes");
  }
  // "chunk_fingerprints" (common/agent_link/messages.h): the daemon's chunk
  // size when it takes fingerprints, else 0. QueryKnown: which chunks (by
  // fingerprint) it holds from this agent's earlier captures (1 per held
  // one). MarkKnown: chunks [first_chunk, +fps.size()) of `region` are
  // those chunks (only ones QueryKnown said are held): their bytes are not
  // sent. TellFingerprints: the fingerprints of chunks sent as bytes, so a
  // later capture can name them.
  virtual uint64_t FingerprintChunkSize() const { return 0; }
  virtual Status QueryKnown(const std::vector<ChunkFingerprint>& /*fps*/,
                            std::vector<uint8_t>* /*held*/) {
    return Error("this transport takes no fingerprints");
  }
  virtual Status MarkKnown(int /*region*/, uint64_t /*first_chunk*/,
                           const std::vector<ChunkFingerprint>& /*fps*/) {
    return Error("this transport takes no fingerprints");
  }
  virtual Status TellFingerprints(int /*region*/, uint64_t /*first_chunk*/,
                                  const std::vector<ChunkFingerprint>& /*fps*/) {
    return Error("this transport takes no fingerprints");
  }
  // Sent with End (informational).
  virtual void SetTiming(const CaptureTiming& /*timing*/) {}
  // Commits the capture. post_complete=false: the post image was not taken.
  // An asynchronous transport returns as soon as the end is queued (every
  // byte is already in the ring) and reports the daemon's verdict later; a
  // synchronous one returns the verdict.
  virtual Status End(bool post_complete) = 0;
  // Abandons the capture; the daemon keeps nothing of it.
  virtual void Abort(std::string_view reason) = 0;
};

class CaptureTransport {
 public:
  virtual ~CaptureTransport() = default;
  // True while at least one arm may match (cheap; read under the launch gate).
  virtual bool Armed() const = 0;
  // The flag behind Armed(), when the transport has one that stays valid for
  // its lifetime: launch hot paths read it directly (one atomic load).
  virtual const std::atomic<bool>* ArmedFlag() const { return nullptr; }
  // True when TransportSession::End returns before the daemon's verdict.
  virtual bool AsyncEnd() const { return false; }
  // A dispatch that ShouldCapture selected could not be captured (reason in
  // words). give_back: return the capture to its arm so a later matching
  // dispatch is taken where the selector allows. Returns whether it was.
  virtual bool ReportSkipped(const CaptureTicket& /*ticket*/, const KernelMatchInfo& /*info*/,
                             std::string_view /*reason*/, bool /*give_back*/) {
    return false;
  }
  // The arms that would select a dispatch of `info` now, without counting it
  // as a dispatch. For refusals decided before anything runs (a CUDA graph
  // the agent cannot execute node by node): they are reported on these arms
  // (ReportSkipped with the arm's id) while the arms keep waiting for a
  // dispatch that can be captured.
  virtual std::vector<std::string> ArmsMatching(const KernelMatchInfo& /*info*/) { return {}; }
  // Selector check: a ticket when this dispatch is to be captured. Counting
  // (nth dispatch, skip, count) happens inside, so call it once per dispatch.
  virtual std::optional<CaptureTicket> ShouldCapture(const KernelMatchInfo& info) = 0;
  virtual Result<std::unique_ptr<TransportSession>> Begin(const CaptureHeader& header,
                                                          std::string_view arg_blob) = 0;
  // Fork child: forget the parent's connection state (the child is a new agent).
  virtual void ResetAfterFork() {}
};

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_CORE_CAPTURE_TRANSPORT_H_
