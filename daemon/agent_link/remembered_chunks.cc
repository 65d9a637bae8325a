#include "daemon/agent_link/remembered_chunks.h"

namespace kerncap::link {

bool RememberedChunks::Remember(const ChunkFingerprint& fp, const Entry& entry) {
  auto it = entries_.find(fp);
  if (it != entries_.end()) {
    it->second = entry;
    return true;
  }
  if (entries_.size() >= max_entries_) return false;
  entries_.emplace(fp, entry);
  return true;
}

const RememberedChunks::Entry* RememberedChunks::Find(const ChunkFingerprint& fp) const {
  auto it = entries_.find(fp);
  return it == entries_.end() ? nullptr : &it->second;
}

ZeroChunkFingerprints::ZeroChunkFingerprints(uint64_t chunk_size, size_t max_lengths)
    : chunk_size_(chunk_size), max_lengths_(max_lengths) {
  if (chunk_size_ > 0 && max_lengths_ > 0) {
    const ChunkFingerprint fp = ZeroChunkFingerprint(chunk_size_);
    by_length_.emplace(chunk_size_, fp);
    by_fingerprint_.emplace(fp, chunk_size_);
  }
}

void ZeroChunkFingerprints::AddRegionTail(uint64_t region_bytes) {
  if (chunk_size_ == 0) return;
  const uint64_t tail = region_bytes % chunk_size_;
  if (tail == 0 || by_length_.contains(tail) || by_length_.size() >= max_lengths_) return;
  const ChunkFingerprint fp = ZeroChunkFingerprint(tail);
  by_length_.emplace(tail, fp);
  by_fingerprint_.emplace(fp, tail);
}

bool ZeroChunkFingerprints::IsZero(const ChunkFingerprint& fp) const {
  return by_fingerprint_.contains(fp);
}

bool ZeroChunkFingerprints::IsZeroOfLength(const ChunkFingerprint& fp, uint64_t bytes) {
  auto it = by_fingerprint_.find(fp);
  return it != by_fingerprint_.end() && it->second == bytes;
}

}  // namespace kerncap::link
