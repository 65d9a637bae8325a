#include "daemon/store/ingest.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/digest.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace kerncap::store {
namespace {

// What a worker found out about one chunk.
struct ChunkResult {
  Digest digest;            // all-zero: zero chunk
  uint32_t new_stored = 0;  // > 0: this worker wrote it
  uint64_t pack_seq = 0;    // > 0: lives in a pack that may not be durable yet
  absl::Status status;
};

bool IsZeroDigest(const Digest& d) { return d == Digest{}; }

}  // namespace

// ---------------------------------------------------------------------------
// Per-chunk work (Store::Impl).

bool Store::Impl::FindStored(const Digest& d, uint64_t* pending_seq) {
  *pending_seq = 0;
  if (index_.Contains(d)) return true;
  if (appender_->FindPending(d, pending_seq)) return true;
  // A seal may have moved it from pending to the index between the checks
  // (seals insert into the index before they stop being pending).
  return index_.Contains(d);
}

void Store::Impl::ProcessChunk(const ChunkTask& t, ChunkCompressor& compressor,
                               std::string& scratch, std::string& private_copy) {
  ChunkResult r;
  IngestImpl* in = t.ingest;
  if (in->Dead()) {
    // Nothing to do; the ingest will fail anyway.
    if (t.group) t.group->Done();
  } else {
    // The producer's bytes may be memory another process can still write
    // (an agent's ring slot): take one private copy and derive the zero
    // check, the content address and the stored bytes all from it, so what
    // is stored always hashes to the address it is stored under. The copy
    // also hands the producer's memory back before the expensive part.
    private_copy.resize(t.size);
    std::memcpy(private_copy.data(), t.data, t.size);
    if (t.group) t.group->Done();
    const char* data = private_copy.data();
    if (IsAllZero(data, t.size)) {
      // Zero chunks are never stored: r.digest stays all-zero.
    } else {
      r.digest = Sha256(data, t.size);
      // Pin before looking up: a GC sweep that runs after this cannot free
      // it, and one that ran before has already removed it from the index.
      pins_.Note(in, r.digest);
      if (!FindStored(r.digest, &r.pack_seq)) {
        DigestClaims::Claim claim(claims_, r.digest);
        // Someone may have finished writing it while we waited for the claim.
        if (!FindStored(r.digest, &r.pack_seq)) {
          auto codec = compressor.Encode(absl::string_view(data, t.size), &scratch);
          if (!codec.ok()) {
            r.status = codec.status();
          } else {
            auto seq = appender_->Append(r.digest, *codec, scratch, t.size,
                                         Xxh3(scratch.data(), scratch.size()));
            if (seq.ok()) {
              r.pack_seq = *seq;
              r.new_stored = static_cast<uint32_t>(scratch.size());
            } else {
              r.status = seq.status();
            }
          }
        }
      }
    }
  }
  // The caller's bytes were released above, before telling the ingest, so
  // Commit returns only after every on_consumed ran.
  in->ChunkDone(t.slot, t.chunk, r.digest, t.size, r.new_stored, r.pack_seq, r.status);
}

void Store::Impl::PublishPack(std::unique_ptr<PackReader> reader,
                              const std::vector<PackEntry>& entries) {
  const uint32_t id = AddPack(std::move(reader));
  for (const PackEntry& e : entries) {
    index_.InsertIfAbsent(e.digest,
                          ChunkLocation{id, e.stored_len, e.offset, e.raw_len, e.codec, e.xxh3});
  }
}

// ---------------------------------------------------------------------------
// IngestImpl.

IngestImpl::IngestImpl(Store::Impl* store)
    : store_(store), chunk_size_(store->opts_.chunk_size), start_(absl::Now()) {
  store_->pins_.Register(this);
}

IngestImpl::~IngestImpl() {
  {
    absl::MutexLock l(&mu_);
    if (!committed_ && error_.ok()) error_ = absl::AbortedError("capture dropped without Commit");
    while (outstanding_ > 0) done_cv_.Wait(&mu_);
  }
  store_->pins_.Unregister(this);
}

uint32_t IngestImpl::NumChunks(uint64_t size) const {
  return static_cast<uint32_t>((size + chunk_size_ - 1) / chunk_size_);
}

absl::Status IngestImpl::Usable() const {
  if (!error_.ok()) return error_;
  if (committed_ || committing_) return absl::FailedPreconditionError("capture already committed");
  return absl::OkStatus();
}

bool IngestImpl::Dead() const {
  absl::MutexLock l(&mu_);
  return !error_.ok();
}

absl::StatusOr<int> IngestImpl::AddRegion(ImageKind image, const v1::Region& region) {
  if (region.data().chunk_digests_size() != 0 || region.changed_chunks_size() != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "region at va 0x%x: data.chunk_digests/changed_chunks must be empty", region.va()));
  }
  const uint64_t size = region.data().size();
  if (size / chunk_size_ >= (1ull << 32)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("region at va 0x%x is too large", region.va()));
  }
  auto slot = std::make_unique<Slot>();
  slot->image = image;
  slot->region = region;
  slot->size = size;
  try {
    slot->digests.resize(NumChunks(size));
    slot->received.resize(NumChunks(size));
  } catch (const std::bad_alloc&) {
    // Producers bound what they declare; this keeps a bound they missed
    // from taking the daemon down.
    return absl::ResourceExhaustedError(absl::StrFormat(
        "region at va 0x%x: no memory for the table of its %d chunks", region.va(),
        NumChunks(size)));
  }
  absl::MutexLock l(&mu_);
  KC_RETURN_IF_ERROR(Usable());
  slots_.push_back(std::move(slot));
  progress_.bytes_declared += size;
  return static_cast<int>(slots_.size() - 1);
}

absl::Status IngestImpl::WriteRegion(int handle, uint64_t offset, const void* data, size_t size,
                                     std::function<void()> on_consumed) {
  absl::Status st;
  {
    absl::MutexLock l(&mu_);
    st = Usable();
    Slot* s = nullptr;
    if (st.ok()) {
      if (handle < 0 || static_cast<size_t>(handle) >= slots_.size() || slots_[handle]->is_code) {
        st = absl::InvalidArgumentError(absl::StrCat("unknown region handle ", handle));
      } else {
        s = slots_[handle].get();
      }
    }
    if (st.ok()) {
      const uint64_t end = offset + size;
      if (offset % chunk_size_ != 0 || end > s->size || end < offset ||
          (size % chunk_size_ != 0 && end != s->size)) {
        st = absl::InvalidArgumentError(absl::StrFormat(
            "region at va 0x%x: write [%d, +%d) is not chunk-aligned or exceeds its size %d",
            s->region.va(), offset, size, s->size));
      }
    }
    if (st.ok() && size > 0) {
      const uint32_t first = static_cast<uint32_t>(offset / chunk_size_);
      const uint32_t n = NumChunks(size);
      for (uint32_t i = first; i < first + n; ++i) {
        if (s->received[i]) {
          st = absl::InvalidArgumentError(
              absl::StrFormat("region at va 0x%x: chunk %d written twice", s->region.va(), i));
          break;
        }
      }
      if (st.ok()) {
        for (uint32_t i = first; i < first + n; ++i) s->received[i] = 1;
        s->received_count += n;
        outstanding_ += n;
        progress_.bytes_received += size;
      }
    }
  }
  if (!st.ok() || size == 0) {
    // The bytes are not needed (any more); let the producer reuse them.
    if (on_consumed) on_consumed();
    return st;
  }
  SubmitChunks(handle, offset, static_cast<const char*>(data), size, std::move(on_consumed));
  return absl::OkStatus();
}

absl::Status IngestImpl::MarkUnchanged(int handle, uint64_t first_chunk, uint64_t count) {
  absl::MutexLock l(&mu_);
  KC_RETURN_IF_ERROR(Usable());
  if (handle < 0 || static_cast<size_t>(handle) >= slots_.size() || slots_[handle]->is_code) {
    return absl::InvalidArgumentError(absl::StrCat("unknown region handle ", handle));
  }
  Slot* s = slots_[handle].get();
  if (s->image != ImageKind::kPost) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "region at va 0x%x: only post-image chunks can be declared unchanged", s->region.va()));
  }
  if (s->same_as < 0) {
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Slot& pre = *slots_[i];
      if (pre.is_code || pre.image != ImageKind::kPre || pre.region.va() != s->region.va() ||
          pre.region.device() != s->region.device()) {
        continue;
      }
      if (pre.size != s->size) break;
      s->same_as = static_cast<int>(i);
    }
    if (s->same_as < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "region at va 0x%x: chunks declared unchanged, but this capture has no pre-image "
          "region of %d bytes at that va and device",
          s->region.va(), s->size));
    }
    s->unchanged.assign(s->digests.size(), 0);
  }
  const uint64_t total = s->digests.size();
  if (count == 0 || first_chunk >= total || count > total - first_chunk) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "region at va 0x%x: unchanged chunks [%d, +%d) outside its %d chunks", s->region.va(),
        first_chunk, count, total));
  }
  for (uint64_t i = first_chunk; i < first_chunk + count; ++i) {
    if (s->received[i]) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "region at va 0x%x: chunk %d written or declared unchanged twice", s->region.va(), i));
    }
  }
  for (uint64_t i = first_chunk; i < first_chunk + count; ++i) {
    s->received[i] = 1;
    s->unchanged[i] = 1;
  }
  s->received_count += static_cast<uint32_t>(count);
  return absl::OkStatus();
}

bool IngestImpl::HoldsChunk(const Digest& digest) {
  if (IsZeroDigest(digest)) return true;
  uint64_t seq = 0;
  return store_->FindStored(digest, &seq);
}

absl::Status IngestImpl::MarkKnown(int handle, uint64_t first_chunk,
                                   const std::vector<Digest>& digests) {
  // Pin first, then look up (gc_pins.h): a sweep after the Note keeps them,
  // one before has already removed them from the index and they are missed.
  std::vector<uint64_t> seqs(digests.size(), 0);
  for (size_t i = 0; i < digests.size(); ++i) {
    if (IsZeroDigest(digests[i])) continue;
    store_->pins_.Note(this, digests[i]);
    if (!store_->FindStored(digests[i], &seqs[i])) {
      return absl::NotFoundError(absl::StrCat("chunk ", digests[i].ToHex(),
                                              " is no longer in the store (removed by a GC?)"));
    }
  }
  absl::MutexLock l(&mu_);
  KC_RETURN_IF_ERROR(Usable());
  if (handle < 0 || static_cast<size_t>(handle) >= slots_.size() || slots_[handle]->is_code) {
    return absl::InvalidArgumentError(absl::StrCat("unknown region handle ", handle));
  }
  Slot* s = slots_[handle].get();
  const uint64_t total = s->digests.size();
  const uint64_t count = digests.size();
  if (count == 0 || first_chunk >= total || count > total - first_chunk) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "region at va 0x%x: known chunks [%d, +%d) outside its %d chunks", s->region.va(),
        first_chunk, count, total));
  }
  for (uint64_t i = first_chunk; i < first_chunk + count; ++i) {
    if (s->received[i]) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "region at va 0x%x: chunk %d written or declared twice", s->region.va(), i));
    }
  }
  for (uint64_t i = 0; i < count; ++i) {
    s->received[first_chunk + i] = 1;
    s->digests[first_chunk + i] = digests[i];
    if (seqs[i] > 0) pack_deps_.insert(seqs[i]);
  }
  s->received_count += static_cast<uint32_t>(count);
  uint64_t bytes = 0;
  for (uint64_t i = first_chunk; i < first_chunk + count; ++i) {
    bytes += std::min<uint64_t>(chunk_size_, s->size - i * chunk_size_);
  }
  progress_.bytes_received += bytes;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Digest>> IngestImpl::CommittedDigests(int handle) const {
  absl::MutexLock l(&mu_);
  if (!committed_) return absl::FailedPreconditionError("the capture is not committed");
  if (handle < 0 || static_cast<size_t>(handle) >= slots_.size() || slots_[handle]->is_code) {
    return absl::InvalidArgumentError(absl::StrCat("unknown region handle ", handle));
  }
  return slots_[handle]->digests;
}

void IngestImpl::SubmitChunks(int slot, uint64_t offset, const char* data, size_t size,
                              std::function<void()> on_consumed) {
  const uint32_t n = NumChunks(size);
  auto group = std::make_shared<WriteGroup>(static_cast<int>(n), std::move(on_consumed));
  const uint32_t first = static_cast<uint32_t>(offset / chunk_size_);
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t off = static_cast<uint64_t>(i) * chunk_size_;
    ChunkTask t;
    t.ingest = this;
    t.slot = slot;
    t.chunk = first + i;
    t.data = data + off;
    t.size = static_cast<uint32_t>(std::min<uint64_t>(chunk_size_, size - off));
    t.group = group;
    store_->pipeline_->Submit(std::move(t));
  }
}

absl::Status IngestImpl::AddCodeObject(const v1::CodeObject& meta, const void* data, size_t size) {
  const Digest d = Sha256(data, size);
  if (!meta.digest().empty() && meta.digest() != d.ToBytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "code object '", meta.name(), "': digest does not match its bytes (", d.ToHex(), ")"));
  }
  // The caller's buffer is only valid during this call: keep a copy until
  // the pipeline is done with it.
  auto copy = std::make_shared<std::string>(static_cast<const char*>(data), size);
  auto slot = std::make_unique<Slot>();
  slot->is_code = true;
  slot->code = meta;
  slot->code.set_digest(d.ToBytes());
  slot->code.clear_data();
  slot->size = size;
  slot->digests.resize(NumChunks(size));
  slot->received.assign(NumChunks(size), 1);
  slot->received_count = NumChunks(size);
  int handle;
  {
    absl::MutexLock l(&mu_);
    KC_RETURN_IF_ERROR(Usable());
    slots_.push_back(std::move(slot));
    handle = static_cast<int>(slots_.size() - 1);
    outstanding_ += NumChunks(size);
  }
  if (size > 0) SubmitChunks(handle, 0, copy->data(), size, [copy] {});
  return absl::OkStatus();
}

void IngestImpl::ChunkDone(int slot, uint32_t chunk, const Digest& digest, uint32_t raw,
                           uint32_t new_stored, uint64_t pack_seq, absl::Status status) {
  absl::MutexLock l(&mu_);
  if (!status.ok()) {
    if (error_.ok()) error_ = status;
  } else {
    slots_[slot]->digests[chunk] = digest;
    if (new_stored > 0) written_[digest] = Written{raw, new_stored};
    if (pack_seq > 0) pack_deps_.insert(pack_seq);
  }
  if (--outstanding_ == 0) done_cv_.SignalAll();
}

void IngestImpl::Abort(absl::string_view reason) {
  absl::MutexLock l(&mu_);
  if (committed_ || !error_.ok()) return;
  error_ = absl::AbortedError(absl::StrCat("capture aborted: ", reason));
  log::Info("capture.aborted", {{"reason", std::string(reason)}});
}

IngestProgress IngestImpl::Progress() const {
  absl::MutexLock l(&mu_);
  return progress_;
}

v1::ChunkList IngestImpl::MakeList(const Slot& s, const std::vector<uint32_t>* only) const {
  v1::ChunkList list;
  list.set_size(s.size);
  list.set_chunk_size(chunk_size_);
  auto add = [&](uint32_t i) {
    list.add_chunk_digests(IsZeroDigest(s.digests[i]) ? std::string() : s.digests[i].ToBytes());
  };
  if (only != nullptr) {
    for (uint32_t i : *only) add(i);
  } else {
    for (uint32_t i = 0; i < s.digests.size(); ++i) add(i);
  }
  return list;
}

absl::StatusOr<std::string> IngestImpl::Commit(v1::CaptureManifest manifest) {
  std::set<uint64_t> deps;
  {
    absl::MutexLock l(&mu_);
    KC_RETURN_IF_ERROR(Usable());
    committing_ = true;
    while (outstanding_ > 0) done_cv_.Wait(&mu_);
    if (!error_.ok()) return error_;
    for (const auto& s : slots_) {
      if (s->received_count != s->digests.size()) {
        error_ = absl::FailedPreconditionError(
            absl::StrFormat("region at va 0x%x: only %d of %d chunks were written", s->region.va(),
                            s->received_count, s->digests.size()));
        return error_;
      }
    }
    // Chunks declared unchanged take the digests this ingest computed for
    // the pre image (all its writes are done: outstanding_ is 0).
    for (const auto& s : slots_) {
      if (s->same_as < 0) continue;
      const Slot& pre = *slots_[s->same_as];
      for (size_t i = 0; i < s->unchanged.size(); ++i) {
        if (s->unchanged[i]) s->digests[i] = pre.digests[i];
      }
    }
    deps = pack_deps_;
  }
  // Every chunk this capture names must be durable before its manifest.
  for (uint64_t seq : deps) {
    absl::Status st = store_->appender_->EnsureDurable(seq);
    if (!st.ok()) {
      absl::MutexLock l(&mu_);
      error_ = st;
      return st;
    }
  }

  absl::MutexLock l(&mu_);
  manifest.clear_pre();
  manifest.clear_post();
  manifest.clear_code_objects();
  v1::CaptureStats stats;
  absl::flat_hash_set<Digest> counted;
  auto count = [&](const Slot& s, uint32_t i) {
    const uint64_t off = static_cast<uint64_t>(i) * chunk_size_;
    const uint64_t n = std::min<uint64_t>(chunk_size_, s.size - off);
    stats.set_logical_bytes(stats.logical_bytes() + n);
    const Digest& d = s.digests[i];
    if (IsZeroDigest(d)) {
      stats.set_zero_bytes(stats.zero_bytes() + n);
      return;
    }
    stats.set_chunk_count(stats.chunk_count() + 1);
    auto w = written_.find(d);
    if (w != written_.end() && counted.insert(d).second) {
      stats.set_new_raw_bytes(stats.new_raw_bytes() + w->second.raw);
      stats.set_new_stored_bytes(stats.new_stored_bytes() + w->second.stored);
    } else {
      stats.set_dedup_bytes(stats.dedup_bytes() + n);
    }
  };

  // Pre image first: post regions diff against it.
  absl::flat_hash_map<std::pair<uint64_t, uint32_t>, const Slot*> pre_by_va;
  for (const auto& s : slots_) {
    if (s->is_code || s->image != ImageKind::kPre) continue;
    v1::Region* r = manifest.mutable_pre()->add_regions();
    *r = s->region;
    *r->mutable_data() = MakeList(*s, nullptr);
    pre_by_va[{s->region.va(), s->region.device()}] = s.get();
    for (uint32_t i = 0; i < s->digests.size(); ++i) count(*s, i);
  }
  for (const auto& s : slots_) {
    if (s->is_code || s->image != ImageKind::kPost) continue;
    v1::Region* r = manifest.mutable_post()->add_regions();
    *r = s->region;
    auto pre = pre_by_va.find({s->region.va(), s->region.device()});
    if (pre != pre_by_va.end() && pre->second->size == s->size) {
      std::vector<uint32_t> changed;
      for (uint32_t i = 0; i < s->digests.size(); ++i) {
        if (s->digests[i] != pre->second->digests[i]) changed.push_back(i);
      }
      r->set_diff(true);
      for (uint32_t i : changed) {
        r->add_changed_chunks(i);
        count(*s, i);
      }
      *r->mutable_data() = MakeList(*s, &changed);
    } else {
      *r->mutable_data() = MakeList(*s, nullptr);
      for (uint32_t i = 0; i < s->digests.size(); ++i) count(*s, i);
    }
  }
  for (const auto& s : slots_) {
    if (!s->is_code) continue;
    v1::CodeObject* c = manifest.add_code_objects();
    *c = s->code;
    *c->mutable_data() = MakeList(*s, nullptr);
  }
  // New chunks not attributed above (code objects, post chunks equal to pre).
  for (const auto& [d, w] : written_) {
    if (counted.insert(d).second) {
      stats.set_new_raw_bytes(stats.new_raw_bytes() + w.raw);
      stats.set_new_stored_bytes(stats.new_stored_bytes() + w.stored);
    }
  }
  stats.set_ingest_seconds(absl::ToDoubleSeconds(absl::Now() - start_));
  *manifest.mutable_stats() = stats;

  auto id = store_->PublishManifest(std::move(manifest));
  if (!id.ok()) {
    error_ = id.status();
    return error_;
  }
  committed_ = true;
  // The ref now keeps the chunks alive; stop pinning them.
  store_->pins_.Unregister(this);
  return id;
}

}  // namespace kerncap::store
