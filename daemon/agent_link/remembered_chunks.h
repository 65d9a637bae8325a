// remembered_chunks.h: what kerncapd remembers of the chunks one agent
// connection sent as bytes, for the "chunk_fingerprints" feature
// (common/agent_link/messages.h): the agent's fingerprint of each chunk ->
// the SHA-256 digest kerncapd computed itself for those bytes, and their
// length. Filled only from committed captures of the same connection, so a
// fingerprint can only ever name bytes this agent sent (a lying agent makes
// its own capture wrong, never reads or references another's). It dies
// with the connection; at most `max_entries` are kept (further chunks are
// simply not remembered: their later captures send them again).
//
// Thread-safety: the connection's reader thread only.
#ifndef KERNCAP_DAEMON_AGENT_LINK_REMEMBERED_CHUNKS_H_
#define KERNCAP_DAEMON_AGENT_LINK_REMEMBERED_CHUNKS_H_

#include <cstddef>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "common/agent_link/chunk_fingerprint.h"
#include "common/digest.h"

namespace kerncap::link {

// Fingerprints come from agents, so the tables below hash them with absl's
// per-process seeded hash: a hostile agent cannot pick colliding keys.
struct ChunkFingerprintHash {
  size_t operator()(const ChunkFingerprint& f) const { return absl::HashOf(f.lo, f.hi); }
};

class RememberedChunks {
 public:
  struct Entry {
    Digest digest;        // all-zero: a zero chunk
    uint32_t length = 0;  // the chunk's bytes
  };
  explicit RememberedChunks(size_t max_entries) : max_entries_(max_entries) {}

  // Remembers (or refreshes) one chunk; false when the table is full.
  bool Remember(const ChunkFingerprint& fp, const Entry& entry);
  const Entry* Find(const ChunkFingerprint& fp) const;
  size_t size() const { return entries_.size(); }

 private:
  size_t max_entries_;
  absl::flat_hash_map<ChunkFingerprint, Entry, ChunkFingerprintHash> entries_;
};

// The fingerprints of all-zero chunks, which any connection may name from
// its first capture on: a zero chunk's digest is the all-zero one that the
// store never stores (IsZeroDigest), so naming one neither reads nor
// references anything; a lying agent only makes its own capture wrong, as it
// could by sending wrong bytes. Most device memory of a fresh process (KV
// caches, zero-initialised pools and padding) is zero, and this keeps it off
// PCIe on the first capture already.
//
// Lengths are the chunk size and the tails of the regions a connection
// declares; each costs O(length) arithmetic once, so at most
// `max_lengths` are kept (a tail beyond them is simply sent as bytes).
class ZeroChunkFingerprints {
 public:
  ZeroChunkFingerprints(uint64_t chunk_size, size_t max_lengths);

  // Learns the zero fingerprint of a region of `region_bytes` bytes' last
  // chunk (a no-op when it is a whole chunk or the table is full).
  void AddRegionTail(uint64_t region_bytes);
  // Whether `fp` is the zero fingerprint of a length learned so far.
  bool IsZero(const ChunkFingerprint& fp) const;
  // Whether `fp` is the zero fingerprint of exactly `bytes` bytes.
  bool IsZeroOfLength(const ChunkFingerprint& fp, uint64_t bytes) const;

 private:
  void Learn(uint64_t length);

  const uint64_t chunk_size_;
  const size_t max_lengths_;
  absl::flat_hash_set<uint64_t> lengths_;  // learned, so each is computed once
  absl::flat_hash_map<ChunkFingerprint, uint64_t, ChunkFingerprintHash> length_of_;
};

}  // namespace kerncap::link

#endif  // KERNCAP_DAEMON_AGENT_LINK_REMEMBERED_CHUNKS_H_
