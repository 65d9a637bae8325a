// chunk_index.h: the in-memory map from chunk digest to where its bytes live.
// Rebuilt on Open from pack trailers; it only ever holds chunks whose pack is
// durable (renamed and directory-fsynced), so dedup never points at data a
// crash could lose.
//
// Thread-safety: all methods are safe to call concurrently. The map is split
// into shards, each with its own mutex, because every ingest worker looks up
// every chunk it hashes.
#ifndef KERNCAP_DAEMON_STORE_CHUNK_INDEX_H_
#define KERNCAP_DAEMON_STORE_CHUNK_INDEX_H_

#include <array>
#include <cstdint>
#include <functional>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/digest.h"

namespace kerncap::store {

struct ChunkLocation {
  uint32_t pack_id = 0;  // index into the store's pack table
  uint32_t stored_len = 0;
  uint64_t offset = 0;
  uint32_t raw_len = 0;
  uint8_t codec = 0;
  uint64_t xxh3 = 0;
};

class ChunkIndex {
 public:
  std::optional<ChunkLocation> Lookup(const Digest& d) const;
  bool Contains(const Digest& d) const;
  // Inserts unless present; returns true when inserted.
  bool InsertIfAbsent(const Digest& d, const ChunkLocation& loc);
  // Replaces the location (GC moving a chunk to a new pack).
  void Set(const Digest& d, const ChunkLocation& loc);
  // Moves the entry to `loc` if it currently points into `pack_id`.
  bool ReplaceIfIn(const Digest& d, uint32_t pack_id, const ChunkLocation& loc);
  // Removes the entry if it currently points into `pack_id`.
  bool EraseIfIn(const Digest& d, uint32_t pack_id);
  void ForEach(const std::function<void(const Digest&, const ChunkLocation&)>& fn) const;
  size_t size() const;

 private:
  static constexpr size_t kShards = 16;
  struct Shard {
    mutable absl::Mutex mu;
    absl::flat_hash_map<Digest, ChunkLocation> map ABSL_GUARDED_BY(mu);
  };
  Shard& ShardFor(const Digest& d) { return shards_[d.bytes[0] % kShards]; }
  const Shard& ShardFor(const Digest& d) const { return shards_[d.bytes[0] % kShards]; }

  std::array<Shard, kShards> shards_;
};

}  // namespace kerncap::store

#endif  // KERNCAP_DAEMON_STORE_CHUNK_INDEX_H_
