// capture_source.h: one capture's manifest plus on-demand access to its chunk
// bytes, read from a `.kcap` file (format/kcap_file.h), or straight
// from a kerncap store directory (OpenStore: format/store_reader.h,
// read-only, safe next to the kerncapd that owns the store; chunks pread from
// the store's pack files into the caller's memory, the pack's XXH3-64 of the
// stored bytes checked, zstd decoded; packs held open so a concurrent GC
// cannot take them away). The rest of this comment is about the file.
//
// Opening checks the file's structure (header, every record's length, the
// trailer and its record count), parses and checksums the manifest record,
// and indexes the chunk records from their 12-byte headers plus the first
// bytes of each payload: the chunk payloads themselves (gigabytes) are not
// read at open. A chunk is read only when it is needed, with pread straight
// into the caller's memory where it is stored raw; every read checks the
// record's XXH3-64 over the whole payload before it reports success, and the
// chunk's raw size. Nothing but the index and the manifest stays in memory,
// so a 32 GiB capture replays with a few chunks of host memory per thread.
//
// SHA-256 content addresses are NOT recomputed on read unless
// set_verify_content_digests(true) (kerncap-replay --verify-digests): the
// store verified each chunk's address when the chunk entered it, `kerncapctl
// verify` re-checks stores, and the per-record XXH3 detects any damage the
// file took since it was written. What the XXH3 cannot catch is a file
// written wrong by a broken or hostile exporter (a right checksum over wrong
// content); the opt-in catches that, but SHA-256 runs at ~1.5 GB/s per core
// (SHA-NI), so on every restore it would hold the restore far below the
// host-to-device bandwidth it feeds (~56 GB/s pinned on an H200 host).
// Because a chunk record is checksummed only when it is read, damage to a
// record's digest field shows as that chunk missing (NotFound) rather than as
// DataLoss.
//
// Region helpers: chunk i of a ChunkList covers [i*chunk_size, min(size,
// (i+1)*chunk_size)); an empty digest is an all-zero chunk. A post-dispatch
// region with diff=true lists only changed chunks; unchanged ones equal the
// pre image.
#ifndef KERNCAP_REPRODUCER_REPLAY_CORE_CAPTURE_SOURCE_H_
#define KERNCAP_REPRODUCER_REPLAY_CORE_CAPTURE_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "format/kcap_file.h"
#include "format/manifest_check.h"
#include "kerncap/v1/manifest.pb.h"

namespace kerncap::store {
class StoreCapture;
}  // namespace kerncap::store

namespace kerncap::replay {

class CaptureSource {
 public:
  // `unlink_after_open`: remove the file once indexed (temp exports).
  static absl::StatusOr<std::unique_ptr<CaptureSource>> OpenKcap(const std::string& path,
                                                                bool unlink_after_open = false);
  // Capture `capture_id` (a full id or a unique prefix) of the store at
  // `store_dir`, without its lock and without writing to it.
  static absl::StatusOr<std::unique_ptr<CaptureSource>> OpenStore(const std::string& store_dir,
                                                                 const std::string& capture_id);
  ~CaptureSource();

  const v1::CaptureManifest& manifest() const { return manifest_; }
  size_t chunk_count() const;

  // Where the chunks come from, for messages and --json: "kcap:<path>" or
  // "store:<absolute store dir>"; the opener may replace it (a temporary
  // export says "export").
  const std::string& origin() const { return origin_; }
  void set_origin(std::string origin) { origin_ = std::move(origin); }

  // Also recompute each chunk's SHA-256 on read and compare it with its
  // address (default off: see the top of this file). Call before reading.
  void set_verify_content_digests(bool on) { verify_content_digests_ = on; }
  bool verify_content_digests() const { return verify_content_digests_; }

  // Fills *out with the raw bytes of chunk `digest` (32 raw bytes), which must
  // be `raw_size` long. An empty digest yields raw_size zero bytes. NotFound
  // when the file lacks the chunk, DataLoss (naming the file and the record's
  // byte offset) on a checksum, size, decode or (when verifying) digest
  // mismatch.
  absl::Status ReadChunk(const std::string& digest, uint32_t raw_size, std::string* out) const;
  // The same into `out` (raw_size writable bytes; on error their content is
  // undefined). Thread-safe: any number of threads may read chunks
  // concurrently (pread, per-thread buffers and zstd context).
  absl::Status ReadChunkInto(const std::string& digest, uint32_t raw_size, char* out) const;

 private:
  // Where one chunk is in the file. A chunk record's payload (a serialized
  // TransferFrame{chunk: TransferChunk}) splits into three byte ranges:
  //   [0, data_offset)                     prefix: frame and chunk tags and
  //                                        lengths, the fields before `data`,
  //                                        data's tag and length
  //   [data_offset, +data_length)          TransferChunk.data: the raw chunk
  //                                        bytes or one zstd frame
  //   [data_offset + data_length, payload_length)
  //                                        suffix: fields after `data` (empty
  //                                        as exporters write records)
  struct Entry {
    uint64_t record_offset = 0;   // of the record's length field (messages)
    uint64_t checksum = 0;        // XXH3-64 of the payload, from the record header
    uint32_t payload_length = 0;
    uint32_t data_offset = 0;
    uint32_t data_length = 0;
    uint32_t raw_size = 0;        // TransferChunk.raw_size
    int codec = 0;                // TransferChunk.codec (a v1::ChunkCodec value)
  };
  CaptureSource(std::string path, int fd);  // out of line: StoreCapture is incomplete here

  absl::Status ReadManifest(kcap::KcapReader& reader);
  absl::Status IndexChunks(kcap::KcapReader& reader);
  absl::StatusOr<Entry> IndexRecord(const kcap::KcapReader::RecordInfo& record,
                                    const std::string& prefix, std::string* digest) const;
  absl::Status DataLoss(const Entry& e, absl::string_view what) const;

  std::string path_;  // the .kcap file, or the store directory
  int fd_;            // the .kcap file; -1 for a store
  std::string origin_;
  bool verify_content_digests_ = false;
  v1::CaptureManifest manifest_;
  absl::flat_hash_map<std::string, Entry> index_;  // .kcap chunk records
  std::unique_ptr<store::StoreCapture> store_;     // or the store's chunks
};

// Chunk geometry, defined once by the capture format (format/manifest_check.h).
using format::ChunkCount;
using format::ChunkLength;
// Byte offset of chunk i.
uint64_t ChunkOffset(const v1::ChunkList& list, uint64_t i);

// Structural checks of one region (format::ValidateChunkList: chunk size,
// digest counts, diff indices in range and increasing). InvalidArgument
// naming the region.
absl::Status CheckRegion(const v1::Region& region, absl::string_view where);

// The digest chunk i of the region had after the dispatch: the post chunk
// when the post region lists it (diff) or is a full image, else the pre one.
// `post` may be null (region not in the post image: unchanged).
const std::string& PostDigest(const v1::Region& pre, const v1::Region* post, uint64_t i);

// Human form of a region kind (the shared names, common/control/api_names.h: "device",
// "device_vmm", "module_global", ...).
const char* RegionKindName(v1::RegionKind kind);

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CORE_CAPTURE_SOURCE_H_
