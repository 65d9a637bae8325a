#include "daemon/store/chunk_index.h"

namespace kerncap::store {

std::optional<ChunkLocation> ChunkIndex::Lookup(const Digest& d) const {
  const Shard& s = ShardFor(d);
  absl::MutexLock l(&s.mu);
  auto it = s.map.find(d);
  if (it == s.map.end()) return std::nullopt;
  return it->second;
}

bool ChunkIndex::Contains(const Digest& d) const {
  const Shard& s = ShardFor(d);
  absl::MutexLock l(&s.mu);
  return s.map.contains(d);
}

bool ChunkIndex::InsertIfAbsent(const Digest& d, const ChunkLocation& loc) {
  Shard& s = ShardFor(d);
  absl::MutexLock l(&s.mu);
  return s.map.try_emplace(d, loc).second;
}

void ChunkIndex::Set(const Digest& d, const ChunkLocation& loc) {
  Shard& s = ShardFor(d);
  absl::MutexLock l(&s.mu);
  s.map[d] = loc;
}

bool ChunkIndex::ReplaceIfIn(const Digest& d, uint32_t pack_id, const ChunkLocation& loc) {
  Shard& s = ShardFor(d);
  absl::MutexLock l(&s.mu);
  auto it = s.map.find(d);
  if (it == s.map.end() || it->second.pack_id != pack_id) return false;
  it->second = loc;
  return true;
}

bool ChunkIndex::EraseIfIn(const Digest& d, uint32_t pack_id) {
  Shard& s = ShardFor(d);
  absl::MutexLock l(&s.mu);
  auto it = s.map.find(d);
  if (it == s.map.end() || it->second.pack_id != pack_id) return false;
  s.map.erase(it);
  return true;
}

void ChunkIndex::ForEach(const std::function<void(const Digest&, const ChunkLocation&)>& fn) const {
  for (const Shard& s : shards_) {
    absl::MutexLock l(&s.mu);
    for (const auto& [d, loc] : s.map) fn(d, loc);
  }
}

size_t ChunkIndex::size() const {
  size_t n = 0;
  for (const Shard& s : shards_) {
    absl::MutexLock l(&s.mu);
    n += s.map.size();
  }
  return n;
}

}  // namespace kerncap::store
