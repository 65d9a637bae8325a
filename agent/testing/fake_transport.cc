#include "agent/testing/fake_transport.h"

#include <algorithm>
#include <cstring>

namespace kerncap::agent {

class FakeSession : public TransportSession {
 public:
  FakeSession(FakeTransport* t, FakeCapture capture) : t_(t), c_(std::move(capture)) {}
  ~FakeSession() override {
    if (!done_) Abort("session dropped without End");
  }

  Result<int> AddRegion(ImageKind image, const RegionDesc& region) override {
    auto& list = image == ImageKind::kPre ? c_.pre : c_.post;
    if (image == ImageKind::kPre && !c_.post.empty()) return Error("pre region after post");
    list.push_back(FakeRegion{region, std::string(region.size, '\0')});
    // Handles: pre regions 0..n-1, post regions n.. (declaration order).
    return static_cast<int>(c_.pre.size() + c_.post.size() - 1);
  }

  Status AcquireSlot(Slot* slot) override {
    for (size_t i = 0; i < t_->slots_.size(); ++i) {
      if (!t_->slot_busy_[i]) {
        t_->slot_busy_[i] = true;
        *slot = Slot{static_cast<int>(i), t_->slots_[i].data(), t_->slot_size_};
        return OkStatus();
      }
    }
    return Error("no free slot (fake ring exhausted: a slot was not submitted)");
  }

  Status SubmitSlot(const Slot& slot, int region, uint64_t offset, size_t length) override {
    ++t_->submits_;
    if (t_->fail_submit_at_ != 0 && t_->submits_ == t_->fail_submit_at_) {
      return Error("injected SubmitSlot failure");
    }
    if (slot.index < 0 || static_cast<size_t>(slot.index) >= t_->slots_.size() ||
        !t_->slot_busy_[slot.index]) {
      return Error("submitting a slot that is not held");
    }
    if (offset % (t_->chunk_size_ != 0 ? t_->chunk_size_ : t_->slot_size_) != 0) {
      return Error("unaligned offset");
    }
    FakeRegion* r = nullptr;
    if (region >= 0 && static_cast<size_t>(region) < c_.pre.size()) {
      r = &c_.pre[region];
    } else if (region >= 0 && static_cast<size_t>(region) < c_.pre.size() + c_.post.size()) {
      r = &c_.post[region - c_.pre.size()];
    }
    if (r == nullptr || offset + length > r->desc.size) return Error("bad region or range");
    std::memcpy(r->bytes.data() + offset, slot.data, length);
    t_->slot_busy_[slot.index] = false;  // the "daemon" consumed it at once
    return OkStatus();
  }

  void ReturnSlot(const Slot& slot) override {
    if (slot.index >= 0 && static_cast<size_t>(slot.index) < t_->slot_busy_.size()) {
      t_->slot_busy_[slot.index] = false;
    }
  }

  Status AddCodeObject(const CodeObjectRef& code) override {
    if (t_->fail_code_object_) return Error("injected AddCodeObject failure");
    c_.code_objects.push_back(code);
    return OkStatus();
  }

  uint64_t UnchangedChunkSize() const override { return t_->chunk_size_; }
  // Like the daemon's ingest: only post chunks whose pre region (same va and
  // size) this capture declared, each once; the bytes come from that pre.
  Status MarkUnchanged(int region, uint64_t first_chunk, uint64_t count) override {
    const uint64_t cs = t_->chunk_size_;
    if (cs == 0) return Error("fake transport: MarkUnchanged not enabled");
    const size_t npre = c_.pre.size();
    if (region < static_cast<int>(npre) || static_cast<size_t>(region) >= npre + c_.post.size()) {
      return Error("MarkUnchanged: not a post region");
    }
    FakeRegion& post = c_.post[region - npre];
    const FakeRegion* pre = nullptr;
    for (const FakeRegion& r : c_.pre) {
      if (r.desc.va == post.desc.va && r.desc.size == post.desc.size) pre = &r;
    }
    if (pre == nullptr) return Error("MarkUnchanged: no pre region of that va and size");
    const uint64_t chunks = (post.desc.size + cs - 1) / cs;
    if (count == 0 || first_chunk >= chunks || count > chunks - first_chunk) {
      return Error("MarkUnchanged: range outside the region");
    }
    const uint64_t begin = first_chunk * cs;
    const uint64_t end = std::min(post.desc.size, (first_chunk + count) * cs);
    std::memcpy(post.bytes.data() + begin, pre->bytes.data() + begin, end - begin);
    c_.unchanged_chunks += count;
    return OkStatus();
  }
  uint64_t FingerprintChunkSize() const override {
    return t_->fingerprints_ ? t_->chunk_size_ : 0;
  }
  Status QueryKnown(const std::vector<ChunkFingerprint>& fps,
                    std::vector<uint8_t>* held) override {
    if (!t_->fingerprints_) return Error("fake transport: fingerprints not enabled");
    held->clear();
    for (const ChunkFingerprint& f : fps) held->push_back(t_->remembered_.count({f.lo, f.hi}));
    return OkStatus();
  }
  Status MarkKnown(int region, uint64_t first_chunk,
                   const std::vector<ChunkFingerprint>& fps) override {
    if (!t_->fingerprints_) return Error("fake transport: fingerprints not enabled");
    FakeRegion* r = Region(region);
    if (r == nullptr) return Error("MarkKnown: bad region");
    const uint64_t cs = t_->chunk_size_;
    for (size_t i = 0; i < fps.size(); ++i) {
      auto it = t_->remembered_.find({fps[i].lo, fps[i].hi});
      const uint64_t at = (first_chunk + i) * cs;
      if (it == t_->remembered_.end()) return Error("MarkKnown: fingerprint not held");
      if (at >= r->desc.size || it->second.size() != std::min(cs, r->desc.size - at)) {
        return Error("MarkKnown: chunk of another length or outside the region");
      }
      std::memcpy(r->bytes.data() + at, it->second.data(), it->second.size());
      ++c_.known_chunks;
    }
    return OkStatus();
  }
  Status TellFingerprints(int region, uint64_t first_chunk,
                          const std::vector<ChunkFingerprint>& fps) override {
    if (!t_->fingerprints_) return Error("fake transport: fingerprints not enabled");
    if (Region(region) == nullptr) return Error("TellFingerprints: bad region");
    for (size_t i = 0; i < fps.size(); ++i) told_.push_back({region, first_chunk + i, fps[i]});
    return OkStatus();
  }
  void SetTiming(const CaptureTiming& timing) override { c_.timing = timing; }

  Status End(bool post_complete) override {
    done_ = true;
    c_.post_complete = post_complete;
    // Remembered from the bytes received (as kerncapd hashes them), under
    // the fingerprint the agent told.
    for (const Told& t : told_) {
      const FakeRegion* r = Region(t.region);
      const uint64_t cs = t_->chunk_size_, at = t.chunk * cs;
      if (r == nullptr || at >= r->desc.size) continue;
      t_->remembered_[{t.fp.lo, t.fp.hi}] = r->bytes.substr(at, std::min(cs, r->desc.size - at));
    }
    t_->committed_.push_back(std::move(c_));
    return OkStatus();
  }

  void Abort(std::string_view reason) override {
    if (done_) return;
    done_ = true;
    // Like the daemon: nothing of the capture is kept, and its slots return.
    FakeCapture a;
    a.header = c_.header;
    a.abort_reason = std::string(reason);
    t_->aborted_.push_back(std::move(a));
    for (size_t i = 0; i < t_->slot_busy_.size(); ++i) t_->slot_busy_[i] = false;
  }

 private:
  FakeRegion* Region(int region) {
    if (region >= 0 && static_cast<size_t>(region) < c_.pre.size()) return &c_.pre[region];
    if (region >= 0 && static_cast<size_t>(region) < c_.pre.size() + c_.post.size()) {
      return &c_.post[region - c_.pre.size()];
    }
    return nullptr;
  }
  struct Told {
    int region;
    uint64_t chunk;
    ChunkFingerprint fp;
  };
  FakeTransport* t_;
  FakeCapture c_;
  std::vector<Told> told_;
  bool done_ = false;
};

FakeTransport::FakeTransport(size_t slot_size, int slot_count)
    : slot_size_(slot_size),
      slots_(static_cast<size_t>(slot_count), std::string(slot_size, '\0')),
      slot_busy_(static_cast<size_t>(slot_count), false) {}

int FakeTransport::free_slots() const {
  int n = 0;
  for (bool b : slot_busy_) n += b ? 0 : 1;
  return n;
}

void FakeTransport::ArmSelector(std::string pattern, uint64_t skip, uint64_t nth, uint32_t count) {
  pattern_ = std::move(pattern);
  armed_ = true;
  counted_ = true;
  skip_ = skip;
  nth_ = nth;
  count_ = count == 0 ? 1 : count;
  matched_ = 0;
  taken_ = 0;
}

std::vector<std::string> FakeTransport::ArmsMatching(const KernelMatchInfo& info) {
  if (!armed_ || info.demangled_name.find(pattern_) == std::string::npos) return {};
  return {"arm-fake"};
}

bool FakeTransport::ReportSkipped(const CaptureTicket& ticket, const KernelMatchInfo& info,
                                  std::string_view reason, bool give_back) {
  skipped_.push_back(Skipped{ticket, info, std::string(reason), give_back});
  return false;
}

std::optional<CaptureTicket> FakeTransport::ShouldCapture(const KernelMatchInfo& info) {
  if (!armed_) return std::nullopt;
  if (info.demangled_name.find(pattern_) == std::string::npos) return std::nullopt;
  if (!counted_) return CaptureTicket{"arm-fake", ++dispatches_, ""};
  const uint64_t index = ++matched_;
  if (index <= skip_) return std::nullopt;
  const bool take = nth_ != 0 ? index == skip_ + nth_ : taken_ < count_;
  if (!take) return std::nullopt;
  ++taken_;
  if (nth_ != 0 || taken_ >= count_) armed_ = false;  // done
  return CaptureTicket{"arm-fake", index, ""};
}

Result<std::unique_ptr<TransportSession>> FakeTransport::Begin(const CaptureHeader& header,
                                                               std::string_view arg_blob) {
  if (refuse_begin_) return Error("fake daemon refused the capture");
  FakeCapture c;
  c.header = header;
  c.arg_blob = std::string(arg_blob);
  return std::unique_ptr<TransportSession>(new FakeSession(this, std::move(c)));
}


}  // namespace kerncap::agent
