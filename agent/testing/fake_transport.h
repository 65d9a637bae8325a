// fake_transport.h: an in-memory CaptureTransport for tests of the capture
// core (and of backends without a daemon). Committed captures are kept whole;
// aborted ones are recorded only as (header, reason), so a test can check that
// a failure left no partial capture behind.
#ifndef KERNCAP_AGENT_TESTING_FAKE_TRANSPORT_H_
#define KERNCAP_AGENT_TESTING_FAKE_TRANSPORT_H_

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/core/capture_transport.h"

namespace kerncap::agent {

struct FakeRegion {
  RegionDesc desc;
  std::string bytes;  // the bytes received, at their offsets
};

struct FakeCapture {
  CaptureHeader header;
  std::string arg_blob;
  std::vector<FakeRegion> pre;
  std::vector<FakeRegion> post;
  std::vector<CodeObjectRef> code_objects;
  bool post_complete = false;
  std::string abort_reason;  // non-empty: aborted
  CaptureTiming timing;
  uint64_t unchanged_chunks = 0;  // post chunks taken from the pre image (MarkUnchanged)
  uint64_t known_chunks = 0;      // chunks named by fingerprint (MarkKnown)
};

class FakeTransport : public CaptureTransport {
 public:
  explicit FakeTransport(size_t slot_size = 4096, int slot_count = 2);

  // Test knobs.
  void set_armed(bool armed) { armed_ = armed; }
  // Captures dispatches whose demangled name contains `pattern`.
  void Arm(std::string pattern) {
    pattern_ = std::move(pattern);
    armed_ = true;
    counted_ = false;
  }
  // Like a real arm (common/agent_link/selector.h): the first `skip`
  // matching dispatches pass; nth > 0 takes only matching dispatch skip+nth;
  // else `count` (0 means 1) dispatches are taken; then the arm is done
  // (Armed() false). Tickets carry the 1-based index among matching dispatches.
  void ArmSelector(std::string pattern, uint64_t skip, uint64_t nth, uint32_t count);
  // The n-th SubmitSlot (1-based, counted across sessions) fails.
  void FailSubmitAt(int n) { fail_submit_at_ = n; }
  void FailCodeObject(bool fail) { fail_code_object_ = fail; }
  void RefuseBegin(bool refuse) { refuse_begin_ = refuse; }
  // Takes MarkUnchanged in chunks of `bytes` (0: refuses it, the default);
  // SubmitSlot offsets then need only be multiples of it.
  void set_chunk_size(uint64_t bytes) { chunk_size_ = bytes; }
  // Speaks "chunk_fingerprints" (needs set_chunk_size): like kerncapd, it
  // remembers the chunks of committed captures whose fingerprints were told
  // and resolves MarkKnown only to those.
  void enable_fingerprints(bool on) { fingerprints_ = on; }
  size_t remembered_chunks() const { return remembered_.size(); }

  // Dispatches reported as not captured, in order.
  struct Skipped {
    CaptureTicket ticket;
    KernelMatchInfo info;
    std::string reason;
    bool give_back = false;
  };
  const std::vector<Skipped>& skipped() const { return skipped_; }
  const std::vector<FakeCapture>& committed() const { return committed_; }
  const std::vector<FakeCapture>& aborted() const { return aborted_; }
  int free_slots() const;

  // CaptureTransport
  bool Armed() const override { return armed_; }
  std::vector<std::string> ArmsMatching(const KernelMatchInfo& info) override;
  bool ReportSkipped(const CaptureTicket& ticket, const KernelMatchInfo& info,
                     std::string_view reason, bool give_back) override;
  std::optional<CaptureTicket> ShouldCapture(const KernelMatchInfo& info) override;
  Result<std::unique_ptr<TransportSession>> Begin(const CaptureHeader& header,
                                                  std::string_view arg_blob) override;

 private:
  friend class FakeSession;
  size_t slot_size_;
  std::vector<std::string> slots_;
  std::vector<bool> slot_busy_;
  bool armed_ = false;
  std::string pattern_;
  uint64_t dispatches_ = 0;
  bool counted_ = false;  // ArmSelector mode
  uint64_t skip_ = 0;
  uint64_t nth_ = 0;
  uint32_t count_ = 1;
  uint64_t matched_ = 0;
  uint32_t taken_ = 0;
  std::vector<Skipped> skipped_;
  int submits_ = 0;
  int fail_submit_at_ = 0;
  bool fail_code_object_ = false;
  bool refuse_begin_ = false;
  uint64_t chunk_size_ = 0;
  bool fingerprints_ = false;
  std::map<std::pair<uint64_t, uint64_t>, std::string> remembered_;  // (lo, hi) -> bytes
  std::vector<FakeCapture> committed_;
  std::vector<FakeCapture> aborted_;
};

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_TESTING_FAKE_TRANSPORT_H_
