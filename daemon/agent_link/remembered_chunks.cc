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
  if (chunk_size_ > 0) Learn(chunk_size_);
}

void ZeroChunkFingerprints::AddRegionTail(uint64_t region_bytes) {
  if (chunk_size_ > 0 && region_bytes % chunk_size_ != 0) Learn(region_bytes % chunk_size_);
}

void ZeroChunkFingerprints::Learn(uint64_t length) {
  if (lengths_.size() >= max_lengths_ || !lengths_.insert(length).second) return;
  length_of_.emplace(ZeroChunkFingerprint(length), length);
}

bool ZeroChunkFingerprints::IsZero(const ChunkFingerprint& fp) const {
  return length_of_.contains(fp);
}

bool ZeroChunkFingerprints::IsZeroOfLength(const ChunkFingerprint& fp, uint64_t bytes) const {
  auto it = length_of_.find(fp);
  return it != length_of_.end() && it->second == bytes;
}

}  // namespace kerncap::link
