#include "agent/core/capture_orchestrator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "agent/core/log.h"

namespace kerncap::agent {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

std::string Where(const RegionDesc& region, uint64_t offset) {
  char where[96];
  snprintf(where, sizeof(where), "region 0x%llx+%llu: ",
           static_cast<unsigned long long>(region.va), static_cast<unsigned long long>(offset));
  return where;
}

}  // namespace

PendingCapture::~PendingCapture() { FreeSnapshots(); }

void PendingCapture::FreeSnapshots() {
  if (ops_ == nullptr) return;
  if (pre_buffer_ != 0) ops_->Free(pre_buffer_);
  if (post_buffer_ != 0) ops_->Free(post_buffer_);
  pre_buffer_ = post_buffer_ = 0;
}

Result<std::unique_ptr<PendingCapture>> CaptureOrchestrator::Before(
    std::unique_ptr<DispatchSource> source, const CaptureHeader& header,
    std::string_view arg_blob, std::chrono::steady_clock::time_point gate_taken) {
  auto p = std::make_unique<PendingCapture>();
  p->header_ = header;
  p->source_ = std::move(source);
  p->gate_taken_ = gate_taken;

  auto t0 = std::chrono::steady_clock::now();
  Status s = p->source_->Quiesce();
  if (!s.ok()) return Error("quiesce failed: " + s.message());
  p->stats_.quiesce_seconds = SecondsSince(t0);

  auto regions = p->source_->Regions();
  if (!regions.ok()) return Error("enumerating regions failed: " + regions.error());
  p->regions_ = std::move(regions.value());
  p->regions_.erase(std::remove_if(p->regions_.begin(), p->regions_.end(),
                                   [](const RegionDesc& r) { return r.size == 0; }),
                    p->regions_.end());
  p->stats_.regions = p->regions_.size();

  auto codes = p->source_->CodeObjects();
  if (!codes.ok()) return Error("code object lookup failed: " + codes.error());

  auto session = transport_->Begin(header, arg_blob);
  if (!session.ok()) return Error("daemon refused the capture: " + session.error());
  p->session_ = std::move(session.value());

  t0 = std::chrono::steady_clock::now();
  SetUpFingerprints(*p);
  TrySnapshot(*p, codes.value());
  if (p->ops_ != nullptr) {
    p->stats_.pre_seconds = SecondsSince(t0);
    return p;
  }
  if (p->fp_ops_ != nullptr) {
    FingerprintPre(*p, [&](size_t i) { return p->regions_[i].va; });
  }
  s = SendImage(*p, ImageKind::kPre, &p->stats_.pre_bytes);
  p->stats_.pcie_bytes += p->stats_.pre_bytes;
  if (s.ok()) s = SendCodeObjects(*p, codes.value());
  p->stats_.pre_seconds = SecondsSince(t0);
  if (!s.ok()) {
    std::string reason = "pre-dispatch snapshot failed: " + s.message();
    p->session_->Abort(reason);
    return Error(reason);
  }
  return p;
}

void CaptureOrchestrator::SetUpFingerprints(PendingCapture& p) {
  CaptureStatsSummary& st = p.stats_;
  DeviceSnapshotOps* ops = p.source_->snapshot_ops();
  if (ops == nullptr) {
    st.fingerprint_note = "the backend offers no device fingerprints";
    return;
  }
  if (!policy_.fingerprints) {
    st.fingerprint_note = "fingerprints disabled (KERNCAP_AGENT_FINGERPRINTS=0)";
    return;
  }
  const uint64_t chunk = p.session_->FingerprintChunkSize();
  if (chunk == 0 || chunk % 8 != 0 || chunk != p.session_->UnchangedChunkSize()) {
    st.fingerprint_note = "kerncapd does not take fingerprints (chunk_fingerprints)";
    return;
  }
  p.fp_ops_ = ops;
  p.chunk_ = chunk;
}

std::vector<uint8_t> CaptureOrchestrator::HeldByDaemon(PendingCapture& p,
                                                       const std::vector<ChunkFingerprint>& fps) {
  std::vector<uint8_t> held;
  if (fps.empty()) return held;
  Status s = p.session_->QueryKnown(fps, &held);
  if (!s.ok() || held.size() != fps.size()) {
    held.assign(fps.size(), 0);
    if (p.stats_.fingerprint_note.empty()) {
      p.stats_.fingerprint_note = "asking kerncapd which chunks it holds failed (" +
                                  (s.ok() ? std::string("wrong count") : s.message()) + ")";
    }
  }
  return held;
}

template <typename SrcOf>
void CaptureOrchestrator::FingerprintPre(PendingCapture& p, const SrcOf& src_of) {
  auto t0 = std::chrono::steady_clock::now();
  const uint64_t chunk = p.chunk_;
  const size_t n = p.regions_.size();
  p.pre_fp_.assign(n, {});
  p.pre_held_.assign(n, {});
  std::vector<ChunkFingerprint> all;
  for (size_t i = 0; i < n; ++i) {
    const RegionDesc& r = p.regions_[i];
    std::vector<ChunkFingerprint> fps;
    Status s = p.fp_ops_->Fingerprint(src_of(i), r.size, chunk, &fps);
    if (!s.ok() || fps.size() != (r.size + chunk - 1) / chunk) {
      // That region goes as bytes; the others keep their fingerprints.
      if (p.stats_.fingerprint_note.empty()) {
        p.stats_.fingerprint_note =
            Where(r, 0) + "not fingerprinted (" + (s.ok() ? "wrong count" : s.message()) + ")";
      }
      continue;
    }
    all.insert(all.end(), fps.begin(), fps.end());
    p.pre_fp_[i] = std::move(fps);
  }
  const std::vector<uint8_t> held = HeldByDaemon(p, all);
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t m = p.pre_fp_[i].size();
    p.pre_held_[i].assign(held.begin() + at, held.begin() + at + m);
    at += m;
  }
  p.stats_.fingerprint_seconds += SecondsSince(t0);
}

template <typename Read>
Status CaptureOrchestrator::SendChunks(PendingCapture& p, int handle, const RegionDesc& r,
                                       uint64_t first, uint64_t end,
                                       const std::vector<ChunkFingerprint>& fps,
                                       const std::vector<uint8_t>& held, uint64_t* bytes,
                                       const Read& read) {
  const uint64_t chunk = p.chunk_;
  auto byte_at = [&](uint64_t c) { return std::min(r.size, c * chunk); };
  if (fps.empty()) {
    return Stream(p, handle, byte_at(first), byte_at(end) - byte_at(first), bytes, read);
  }
  for (uint64_t c = first; c < end;) {
    const bool is_held = held[c] != 0;
    uint64_t e = c;
    while (e < end && (held[e] != 0) == is_held) ++e;
    std::vector<ChunkFingerprint> run(fps.begin() + c, fps.begin() + e);
    if (is_held) {
      KC_AGENT_RETURN_IF_ERROR(p.session_->MarkKnown(handle, c, run));
      p.stats_.known_bytes += byte_at(e) - byte_at(c);
    } else {
      KC_AGENT_RETURN_IF_ERROR(Stream(p, handle, byte_at(c), byte_at(e) - byte_at(c), bytes, read));
      KC_AGENT_RETURN_IF_ERROR(p.session_->TellFingerprints(handle, c, run));
    }
    c = e;
  }
  return OkStatus();
}

Status CaptureOrchestrator::SendPostByFingerprint(PendingCapture& p, size_t i, uint64_t* bytes,
                                                  bool* done) {
  *done = false;
  const RegionDesc& r = p.regions_[i];
  if (p.fp_ops_ == nullptr || i >= p.pre_fp_.size() || p.pre_fp_[i].empty()) return OkStatus();
  const std::vector<ChunkFingerprint>& pre = p.pre_fp_[i];
  const uint64_t chunk = p.chunk_;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<ChunkFingerprint> post;
  Status s = p.fp_ops_->Fingerprint(r.va, r.size, chunk, &post);
  if (!s.ok() || post.size() != pre.size()) {
    p.stats_.fingerprint_seconds += SecondsSince(t0);
    return OkStatus();  // the caller sends the region whole
  }
  const uint64_t n = pre.size();
  std::vector<ChunkFingerprint> changed_fps;
  for (uint64_t c = 0; c < n; ++c) {
    if (post[c] != pre[c]) changed_fps.push_back(post[c]);
  }
  // Changed chunks the daemon may hold already (a kernel that writes what
  // it wrote at an earlier capture).
  const std::vector<uint8_t> held_changed = HeldByDaemon(p, changed_fps);
  p.stats_.fingerprint_seconds += SecondsSince(t0);
  std::vector<uint8_t> held(n, 0);
  for (uint64_t c = 0, k = 0; c < n; ++c) {
    if (post[c] != pre[c]) held[c] = held_changed[k++];
  }
  *done = true;
  auto handle = p.session_->AddRegion(ImageKind::kPost, r);
  if (!handle.ok()) return Error("declaring region failed: " + handle.error());
  auto read = [&](void* dst, uint64_t off, size_t len) {
    return p.source_->ReadRegion(r, off, dst, len);
  };
  for (uint64_t c = 0; c < n;) {
    const bool same = post[c] == pre[c];
    uint64_t e = c;
    while (e < n && (post[e] == pre[e]) == same) ++e;
    if (same) {
      KC_AGENT_RETURN_IF_ERROR(p.session_->MarkUnchanged(handle.value(), c, e - c));
      p.stats_.unchanged_post_bytes += std::min(r.size, e * chunk) - c * chunk;
    } else {
      KC_AGENT_RETURN_IF_ERROR(SendChunks(p, handle.value(), r, c, e, post, held, bytes, read));
    }
    c = e;
  }
  return OkStatus();
}

void CaptureOrchestrator::TrySnapshot(PendingCapture& p, std::vector<CodeObjectRef> codes) {
  DeviceSnapshotOps* ops = p.source_->snapshot_ops();
  CaptureStatsSummary& st = p.stats_;
  st.path = CapturePath::kHost;
  if (ops == nullptr) {
    st.path_reason = "the backend offers no device snapshots";
    return;
  }
  if (!policy_.enabled) {
    st.path_reason = "device snapshots disabled (KERNCAP_AGENT_SNAPSHOT=0)";
    return;
  }
  const uint64_t chunk = p.session_->UnchangedChunkSize();
  if (chunk == 0) {
    st.path_reason = "kerncapd does not take unchanged chunks (post_unchanged)";
    return;
  }
  std::vector<uint64_t> at;
  uint64_t needed = 0;
  for (const RegionDesc& r : p.regions_) {
    at.push_back(needed);
    needed += AlignUp(r.size, kSnapshotAlign);
  }
  uint64_t free_bytes = 0, total_bytes = 0;
  Status s = ops->FreeMemory(&free_bytes, &total_bytes);
  if (!s.ok()) {
    st.path_reason = "querying free device memory failed: " + s.message();
    return;
  }
  std::string why;
  if (!policy_.Fits(needed, free_bytes, total_bytes, &why)) {
    st.path_reason = why;
    return;
  }
  uint64_t buffer = 0;
  if (needed > 0) {
    auto b = ops->Allocate(needed);
    if (!b.ok()) {
      st.path_reason = "allocating the snapshot failed: " + b.error();
      return;
    }
    buffer = b.value();
  }
  for (size_t i = 0; i < p.regions_.size() && s.ok(); ++i) {
    at[i] += buffer;
    s = ops->Copy(at[i], p.regions_[i].va, p.regions_[i].size);
    if (!s.ok()) s = Error(Where(p.regions_[i], 0) + s.message());
  }
  if (s.ok()) s = ops->Sync();
  if (!s.ok()) {
    if (buffer != 0) ops->Free(buffer);
    st.path_reason = "device-to-device snapshot failed (" + s.message() + ")";
    return;
  }
  p.ops_ = ops;
  p.pre_buffer_ = buffer;
  p.pre_at_ = std::move(at);
  p.chunk_ = chunk;
  p.codes_ = std::move(codes);
  st.path = CapturePath::kDeviceSnapshot;
  st.path_reason = why;
  st.snapshot_bytes = needed;
}

Result<CaptureStatsSummary> CaptureOrchestrator::After(std::unique_ptr<PendingCapture> p,
                                                       bool launch_ok,
                                                       std::unique_ptr<PendingCapture>* drain) {
  if (!launch_ok) {
    p->session_->Abort("the application's launch failed");
    return Error("the launch failed; capture aborted");
  }
  Status s = p->source_->WaitForDispatch();
  if (!s.ok()) {
    std::string reason = "waiting for the dispatch failed: " + s.message();
    p->session_->Abort(reason);
    return Error(reason);
  }
  auto t0 = std::chrono::steady_clock::now();
  if (p->ops_ != nullptr) {
    s = SnapshotPost(*p);
    p->stats_.post_seconds = SecondsSince(t0);
    if (!s.ok()) {
      std::string reason = "post-dispatch snapshot failed: " + s.message();
      p->session_->Abort(reason);
      return Error(reason);
    }
    const double held = SecondsSince(p->gate_taken_);
    CaptureStatsSummary stats = p->stats_;
    if (drain != nullptr) {
      p->needs_drain_ = true;
      *drain = std::move(p);
      return stats;
    }
    return Drain(std::move(p), held, /*bind_thread=*/false);
  }
  s = SendImage(*p, ImageKind::kPost, &p->stats_.post_bytes);
  p->stats_.pcie_bytes += p->stats_.post_bytes;
  p->stats_.post_seconds = SecondsSince(t0);
  if (!s.ok()) {
    std::string reason = "post-dispatch snapshot failed: " + s.message();
    p->session_->Abort(reason);
    return Error(reason);
  }
  FillTiming(*p, SecondsSince(p->gate_taken_));
  s = p->session_->End(/*post_complete=*/true);
  if (!s.ok()) return Error("ending the capture failed: " + s.message());
  return p->stats_;
}

Status CaptureOrchestrator::SnapshotPost(PendingCapture& p) {
  DeviceSnapshotOps* ops = p.ops_;
  const uint64_t chunk = p.chunk_;
  p.changed_.resize(p.regions_.size());
  p.runs_.assign(p.regions_.size(), {});
  uint64_t post_bytes = 0;
  for (size_t i = 0; i < p.regions_.size(); ++i) {
    const RegionDesc& r = p.regions_[i];
    std::vector<uint8_t>& changed = p.changed_[i];
    KC_AGENT_RETURN_IF_ERROR(ops->DiffChunks(r.va, p.pre_at_[i], r.size, chunk, &changed));
    const uint64_t n = (r.size + chunk - 1) / chunk;
    if (changed.size() != n) return Error(Where(r, 0) + "device compare gave a wrong chunk count");
    // Runs of consecutive changed chunks.
    for (uint64_t c = 0; c < n;) {
      if (!changed[c]) {
        ++c;
        continue;
      }
      uint64_t e = c;
      while (e < n && changed[e]) ++e;
      PendingCapture::ChangedRun run;
      run.offset = c * chunk;
      run.size = std::min(r.size, e * chunk) - run.offset;
      run.buffer_at = post_bytes;
      post_bytes += AlignUp(run.size, kSnapshotAlign);
      p.runs_[i].push_back(run);
      c = e;
    }
  }
  if (post_bytes > 0) {
    auto b = ops->Allocate(post_bytes);
    if (!b.ok()) {
      // No room for the changed chunks: the pre image goes to the ring now
      // and the changed chunks straight from live memory (all in the gate).
      KC_ALOG(kInfo, "no device memory for %.1f MiB of changed chunks (%s): sending them from "
              "live memory", post_bytes / 1048576.0, b.error().c_str());
      p.stats_.path_reason += "; post chunks read from live memory (no room on the device)";
      KC_AGENT_RETURN_IF_ERROR(SendPreFromSnapshot(p));
      KC_AGENT_RETURN_IF_ERROR(SendPostChanged(p, /*from_live=*/true));
      return OkStatus();
    }
    p.post_buffer_ = b.value();
    p.stats_.snapshot_bytes += post_bytes;
    for (size_t i = 0; i < p.regions_.size(); ++i) {
      for (PendingCapture::ChangedRun& run : p.runs_[i]) {
        run.buffer_at += p.post_buffer_;
        KC_AGENT_RETURN_IF_ERROR(ops->Copy(run.buffer_at, p.regions_[i].va + run.offset, run.size));
      }
    }
    KC_AGENT_RETURN_IF_ERROR(ops->Sync());
  }
  return OkStatus();
}

Result<CaptureStatsSummary> CaptureOrchestrator::Drain(std::unique_ptr<PendingCapture> p,
                                                       double held_seconds, bool bind_thread) {
  p->needs_drain_ = false;
  auto t0 = std::chrono::steady_clock::now();
  Status s = bind_thread ? p->ops_->BindDrainThread() : OkStatus();
  if (s.ok() && !p->pre_sent_) s = SendPreFromSnapshot(*p);
  if (s.ok() && !p->post_sent_) s = SendPostChanged(*p, /*from_live=*/false);
  p->FreeSnapshots();
  p->stats_.drain_seconds = SecondsSince(t0);
  if (!s.ok()) {
    std::string reason = "draining the device snapshot failed: " + s.message();
    p->session_->Abort(reason);
    return Error(reason);
  }
  FillTiming(*p, held_seconds);
  s = p->session_->End(/*post_complete=*/true);
  if (!s.ok()) return Error("ending the capture failed: " + s.message());
  return p->stats_;
}

Status CaptureOrchestrator::SendPreFromSnapshot(PendingCapture& p) {
  DeviceSnapshotOps* ops = p.ops_;
  if (p.fp_ops_ != nullptr) FingerprintPre(p, [&](size_t i) { return p.pre_at_[i]; });
  for (size_t i = 0; i < p.regions_.size(); ++i) {
    const RegionDesc& r = p.regions_[i];
    auto handle = p.session_->AddRegion(ImageKind::kPre, r);
    if (!handle.ok()) return Error("declaring region failed: " + handle.error());
    const uint64_t base = p.pre_at_[i];
    auto read = [&](void* dst, uint64_t off, size_t n) {
      return ops->ReadToHost(base + off, dst, n);
    };
    if (p.fp_ops_ != nullptr) {
      KC_AGENT_RETURN_IF_ERROR(SendChunks(p, handle.value(), r, 0, (r.size + p.chunk_ - 1) / p.chunk_,
                                          p.pre_fp_[i], p.pre_held_[i], &p.stats_.pre_bytes,
                                          read));
    } else {
      KC_AGENT_RETURN_IF_ERROR(Stream(p, handle.value(), 0, r.size, &p.stats_.pre_bytes, read));
    }
  }
  p.stats_.pcie_bytes += p.stats_.pre_bytes;
  // Every pre chunk is in the ring: its snapshot is no longer needed.
  if (p.pre_buffer_ != 0) ops->Free(p.pre_buffer_);
  p.pre_buffer_ = 0;
  KC_AGENT_RETURN_IF_ERROR(SendCodeObjects(p, p.codes_));
  p.pre_sent_ = true;
  return OkStatus();
}

Status CaptureOrchestrator::SendPostChanged(PendingCapture& p, bool from_live) {
  DeviceSnapshotOps* ops = p.ops_;
  const uint64_t chunk = p.chunk_;
  for (size_t i = 0; i < p.regions_.size(); ++i) {
    const RegionDesc& r = p.regions_[i];
    auto handle = p.session_->AddRegion(ImageKind::kPost, r);
    if (!handle.ok()) return Error("declaring region failed: " + handle.error());
    const std::vector<uint8_t>& changed = p.changed_[i];
    const uint64_t n = changed.size();
    // Unchanged runs.
    for (uint64_t c = 0; c < n;) {
      if (changed[c]) {
        ++c;
        continue;
      }
      uint64_t e = c;
      while (e < n && !changed[e]) ++e;
      KC_AGENT_RETURN_IF_ERROR(p.session_->MarkUnchanged(handle.value(), c, e - c));
      p.stats_.unchanged_post_bytes += std::min(r.size, e * chunk) - c * chunk;
      c = e;
    }
    // Fingerprints of the changed chunks (from where they are read), to ask
    // the daemon for ones it holds and to tell it the others.
    std::vector<ChunkFingerprint> post_fp;
    std::vector<uint8_t> held;
    if (p.fp_ops_ != nullptr && !p.runs_[i].empty()) {
      auto t0 = std::chrono::steady_clock::now();
      post_fp.assign(n, ChunkFingerprint{});
      std::vector<ChunkFingerprint> changed_fps;
      bool ok = true;
      for (const PendingCapture::ChangedRun& run : p.runs_[i]) {
        std::vector<ChunkFingerprint> fps;
        const uint64_t src = from_live ? r.va + run.offset : run.buffer_at;
        if (!p.fp_ops_->Fingerprint(src, run.size, chunk, &fps).ok() ||
            fps.size() != (run.size + chunk - 1) / chunk) {
          ok = false;
          break;
        }
        std::copy(fps.begin(), fps.end(), post_fp.begin() + run.offset / chunk);
        changed_fps.insert(changed_fps.end(), fps.begin(), fps.end());
      }
      if (ok) {
        const std::vector<uint8_t> held_changed = HeldByDaemon(p, changed_fps);
        held.assign(n, 0);
        size_t k = 0;
        for (const PendingCapture::ChangedRun& run : p.runs_[i]) {
          const uint64_t c0 = run.offset / chunk, c1 = (run.offset + run.size + chunk - 1) / chunk;
          for (uint64_t c = c0; c < c1; ++c) held[c] = held_changed[k++];
        }
      } else {
        post_fp.clear();
      }
      p.stats_.fingerprint_seconds += SecondsSince(t0);
    }
    for (const PendingCapture::ChangedRun& run : p.runs_[i]) {
      uint64_t sent = 0;
      Status s;
      if (!post_fp.empty()) {
        const uint64_t c0 = run.offset / chunk, c1 = (run.offset + run.size + chunk - 1) / chunk;
        if (from_live) {
          s = SendChunks(p, handle.value(), r, c0, c1, post_fp, held, &sent,
                         [&](void* dst, uint64_t off, size_t len) {
                           return p.source_->ReadRegion(r, off, dst, len);
                         });
        } else {
          const uint64_t base = run.buffer_at - run.offset;
          s = SendChunks(p, handle.value(), r, c0, c1, post_fp, held, &sent,
                         [&](void* dst, uint64_t off, size_t len) {
                           return ops->ReadToHost(base + off, dst, len);
                         });
        }
      } else if (from_live) {
        s = Stream(p, handle.value(), run.offset, run.size, &sent,
                   [&](void* dst, uint64_t off, size_t len) {
                     return p.source_->ReadRegion(r, off, dst, len);
                   });
      } else {
        const uint64_t base = run.buffer_at - run.offset;
        s = Stream(p, handle.value(), run.offset, run.size, &sent,
                   [&](void* dst, uint64_t off, size_t len) {
                     return ops->ReadToHost(base + off, dst, len);
                   });
      }
      KC_AGENT_RETURN_IF_ERROR(s);
      p.stats_.post_bytes += sent;
      p.stats_.pcie_bytes += sent;
    }
  }
  if (p.post_buffer_ != 0) ops->Free(p.post_buffer_);
  p.post_buffer_ = 0;
  p.post_sent_ = true;
  return OkStatus();
}

template <typename Read>
Status CaptureOrchestrator::Stream(PendingCapture& p, int handle, uint64_t offset0, uint64_t size,
                                   uint64_t* bytes, const Read& read) {
  uint64_t offset = offset0;
  const uint64_t end = offset0 + size;
  while (offset < end) {
    Slot slot;
    KC_AGENT_RETURN_IF_ERROR(p.session_->AcquireSlot(&slot));
    if (slot.data == nullptr || slot.capacity == 0) return Error("transport gave an empty slot");
    p.source_->OnSlot(slot.data, slot.capacity);
    // Whole chunks per slot, so every submission but a region's last stays
    // chunk-aligned (p.chunk_ is 0 on the host path: whole slots).
    uint64_t cap = slot.capacity;
    if (p.chunk_ != 0 && cap >= p.chunk_) cap -= cap % p.chunk_;
    size_t n = static_cast<size_t>(std::min<uint64_t>(cap, end - offset));
    Status s = read(slot.data, offset, n);
    if (!s.ok()) {
      p.session_->ReturnSlot(slot);
      char where[64];
      snprintf(where, sizeof(where), "+%llu: ", static_cast<unsigned long long>(offset));
      return Error(where + s.message());
    }
    KC_AGENT_RETURN_IF_ERROR(p.session_->SubmitSlot(slot, handle, offset, n));
    offset += n;
    *bytes += n;
  }
  return OkStatus();
}

Status CaptureOrchestrator::SendImage(PendingCapture& p, ImageKind image, uint64_t* bytes) {
  for (size_t i = 0; i < p.regions_.size(); ++i) {
    const RegionDesc& region = p.regions_[i];
    auto read = [&](void* dst, uint64_t off, size_t n) {
      return p.source_->ReadRegion(region, off, dst, n);
    };
    if (image == ImageKind::kPost && p.fp_ops_ != nullptr) {
      bool done = false;
      Status s = SendPostByFingerprint(p, i, bytes, &done);
      if (!s.ok()) return Error("reading " + Where(region, 0) + s.message());
      if (done) continue;
    }
    auto handle = p.session_->AddRegion(image, region);
    if (!handle.ok()) return Error("declaring region failed: " + handle.error());
    Status s;
    if (image == ImageKind::kPre && p.fp_ops_ != nullptr && i < p.pre_fp_.size()) {
      s = SendChunks(p, handle.value(), region, 0, (region.size + p.chunk_ - 1) / p.chunk_,
                     p.pre_fp_[i], p.pre_held_[i], bytes, read);
    } else {
      s = Stream(p, handle.value(), 0, region.size, bytes, read);
    }
    if (!s.ok()) return Error("reading " + Where(region, 0) + s.message());
  }
  return OkStatus();
}

Status CaptureOrchestrator::SendCodeObjects(PendingCapture& p,
                                            const std::vector<CodeObjectRef>& codes) {
  // Each distinct image once per capture, even if several modules share it.
  std::vector<const CodeObjectRef*> sent;
  for (const CodeObjectRef& code : codes) {
    if (!code.bytes || code.bytes->empty()) continue;
    bool dup = std::any_of(sent.begin(), sent.end(), [&](const CodeObjectRef* o) {
      return o->key == code.key && *o->bytes == *code.bytes;
    });
    if (dup) continue;
    Status s = p.session_->AddCodeObject(code);
    if (!s.ok()) return Error("sending code object " + code.name + " failed: " + s.message());
    sent.push_back(&code);
    ++p.stats_.code_objects;
  }
  return OkStatus();
}

void CaptureOrchestrator::FillTiming(PendingCapture& p, double held_seconds) {
  const CaptureStatsSummary& st = p.stats_;
  CaptureTiming t;
  t.path = st.path;
  t.path_reason = st.path_reason;
  t.quiesce_seconds = st.quiesce_seconds;
  t.pre_seconds = st.pre_seconds;
  t.post_seconds = st.post_seconds;
  t.held_seconds = held_seconds;
  t.drain_seconds = st.drain_seconds;
  t.pcie_bytes = st.pcie_bytes;
  t.unchanged_post_bytes = st.unchanged_post_bytes;
  t.fingerprint_seconds = st.fingerprint_seconds;
  if (!st.fingerprint_note.empty()) t.path_reason += "; fingerprints: " + st.fingerprint_note;
  p.session_->SetTiming(t);
}

}  // namespace kerncap::agent
