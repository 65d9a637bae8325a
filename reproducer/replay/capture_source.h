// capture_source.h: one capture's manifest plus on-demand access to its chunk
// bytes, read from a `.kcap` file (client/kerncapctl/kcap_file.h).
//
// Opening indexes the file once (every record's XXH3 is checked by the
// reader); afterwards a chunk is read with pread, decompressed (zstd) and its
// SHA-256 compared with its content address, only when it is needed. Nothing
// but the index and the manifest stays in memory, so a 32 GiB capture replays
// with one chunk of host memory at a time.
//
// Region helpers: chunk i of a ChunkList covers [i*chunk_size, min(size,
// (i+1)*chunk_size)); an empty digest is an all-zero chunk. A post-dispatch
// region with diff=true lists only changed chunks; unchanged ones equal the
// pre image.
#ifndef KERNCAP_REPRODUCER_REPLAY_CAPTURE_SOURCE_H_
#define KERNCAP_REPRODUCER_REPLAY_CAPTURE_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kerncap/v1/manifest.pb.h"

namespace kerncap::replay {

class CaptureSource {
 public:
  // `unlink_after_open`: remove the file once indexed (temp exports).
  static absl::StatusOr<std::unique_ptr<CaptureSource>> OpenKcap(const std::string& path,
                                                                bool unlink_after_open = false);
  ~CaptureSource();

  const v1::CaptureManifest& manifest() const { return manifest_; }
  size_t chunk_count() const { return index_.size(); }

  // Fills *out with the raw bytes of chunk `digest` (32 raw bytes), which must
  // be `raw_size` long. An empty digest yields raw_size zero bytes. NotFound
  // when the file lacks the chunk, DataLoss on a decode or hash mismatch.
  absl::Status ReadChunk(const std::string& digest, uint32_t raw_size, std::string* out) const;
  // The same into `out` (raw_size writable bytes). Thread-safe: any number of
  // threads may read chunks concurrently (pread, per-thread zstd context).
  absl::Status ReadChunkInto(const std::string& digest, uint32_t raw_size, char* out) const;

 private:
  struct Entry {
    uint64_t offset = 0;  // record start (length field)
  };
  CaptureSource(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  std::string path_;
  int fd_;
  v1::CaptureManifest manifest_;
  absl::flat_hash_map<std::string, Entry> index_;
};

// Number of chunks covering list.size bytes.
uint64_t ChunkCount(const v1::ChunkList& list);
// Byte range of chunk i: offset and length.
uint64_t ChunkOffset(const v1::ChunkList& list, uint64_t i);
uint32_t ChunkLength(const v1::ChunkList& list, uint64_t i);

// Structural checks of one region (chunk size set, digest counts, diff
// indices in range and increasing). InvalidArgument naming the region.
absl::Status CheckRegion(const v1::Region& region, absl::string_view where);

// The digest chunk i of the region had after the dispatch: the post chunk
// when the post region lists it (diff) or is a full image, else the pre one.
// `post` may be null (region not in the post image: unchanged).
const std::string& PostDigest(const v1::Region& pre, const v1::Region* post, uint64_t i);

// Human form of a region kind ("device", "vmm", "module_global", ...).
const char* RegionKindName(v1::RegionKind kind);

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CAPTURE_SOURCE_H_
