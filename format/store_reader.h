// store_reader.h: read-only access to a store that another process — the
// kerncapd holding its LOCK — owns and keeps writing (kerncap-replay on the
// daemon's host reads captures this way instead of through the gRPC export
// stream).
//
// A StoreReader never takes the LOCK flock and never writes: no STORE file
// creation, no tmp-* cleanup, no quarantine, no catalog, no orphan removal.
// It opens every file O_RDONLY. What makes that safe next to a live writer
// is the store's write protocol (store.h, pack_writer.h, manifest_store.h):
//   - a pack is appended to only under its tmp-<name>.pack name, and becomes
//     <name>.pack by rename once complete and durable; published packs are
//     never modified in place, so a reader skips tmp-* and sees whole packs;
//   - a capture's ref is written last, after its packs and manifest are
//     durable: a ref the reader can see names a manifest whose chunks are
//     all in published packs;
//   - GC only unlinks packs (DeletePack) or publishes a new pack with the
//     live chunks before unlinking the old one (RewritePack).
//
// GC and a capture being read: OpenCapture locates every chunk of the
// capture and keeps an open descriptor on each pack that holds one. From
// then on nothing the daemon does can take the bytes away (an unlinked
// file's data stays readable through descriptors opened before the unlink;
// the disk space returns when the StoreCapture is destroyed), so reads never
// fail because of a concurrent GC, rewrite or `kerncapctl rm`. The only
// window is inside OpenCapture, between listing packs/ and opening them: a
// pack GC unlinks there is skipped, and packs/ is listed again (the rewritten
// copy was published before the old one went away), up to three times. If a
// chunk is still in no pack after that (the capture was deleted and
// collected meanwhile, or the store is damaged), OpenCapture fails with
// DataLoss naming the chunk (NotFound when the capture's ref is gone); run
// the command again.
//
// Thread-safety: StoreReader and StoreCapture are safe to use from any
// number of threads.
#ifndef KERNCAP_FORMAT_STORE_READER_H_
#define KERNCAP_FORMAT_STORE_READER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/digest.h"
#include "format/manifest_store.h"
#include "kerncap/v1/manifest.pb.h"

namespace kerncap::store {

class PackReader;

// A store is private to the daemon's user and its group (kerncap-replay on
// the host reads it as a group member): every directory is created 0750 and
// every file 0640, whatever the umask (which can only narrow them).
inline constexpr int kStoreDirMode = kManifestDirMode;
inline constexpr int kStoreFileMode = kManifestFileMode;

// The STORE file: "format=1\nchunk_size=<n>\n", written when a store is
// created and never changed (digests depend on the chunk size).
inline constexpr int kStoreFormat = 1;
struct StoreConfig {
  int format = 0;
  uint32_t chunk_size = 0;
};
// Serializes a config as the STORE file holds it.
std::string FormatStoreConfig(const StoreConfig& config);
// Reads `dir`/STORE. NotFound when there is none; FailedPrecondition naming
// the file for an unknown format, a missing or invalid chunk_size, or
// anything else that is not a STORE file of format 1.
absl::StatusOr<StoreConfig> ReadStoreConfig(const std::string& dir);

// Visits every stored (non-zero) chunk digest a manifest references.
void ForEachManifestChunk(const v1::CaptureManifest& m,
                          const std::function<void(const Digest&)>& fn);

// One capture of a store, with the packs that hold its chunks held open.
class StoreCapture {
 public:
  ~StoreCapture();
  StoreCapture(const StoreCapture&) = delete;
  StoreCapture& operator=(const StoreCapture&) = delete;

  const v1::CaptureManifest& manifest() const { return manifest_; }
  const std::string& capture_id() const { return manifest_.capture_id(); }
  // Distinct stored chunks the capture references, and the packs they are in.
  size_t chunk_count() const { return chunks_.size(); }
  size_t pack_count() const { return packs_.size(); }
  bool Contains(const Digest& d) const { return chunks_.contains(d); }

  // Writes chunk `d`'s `raw_size` raw bytes to `out` (the one verified
  // chunk read, chunk_read.h: pread from its pack, XXH3-64 of the stored
  // bytes, zstd frame checksum).
  // NotFound when the capture does not reference `d`; DataLoss naming the
  // chunk, its pack and offset on a size, checksum or decode mismatch.
  // Thread-safe; per-thread scratch only for compressed chunks.
  absl::Status ReadChunkInto(const Digest& d, uint32_t raw_size, char* out) const;

 private:
  friend class StoreReader;
  struct Location {
    const PackReader* pack = nullptr;
    uint64_t offset = 0;
    uint32_t stored_len = 0;
    uint32_t raw_len = 0;
    uint8_t codec = 0;
    uint64_t xxh3 = 0;
  };
  StoreCapture() = default;

  v1::CaptureManifest manifest_;
  std::vector<std::unique_ptr<PackReader>> packs_;
  absl::flat_hash_map<Digest, Location> chunks_;
};

class StoreReader {
 public:
  // Opens the store at `dir` for reading. NotFound when `dir` does not
  // exist; FailedPrecondition when it is not a kerncap store (no STORE file,
  // or an unknown format / malformed STORE, or no refs/captures);
  // PermissionDenied when this process may not read it.
  static absl::StatusOr<std::unique_ptr<StoreReader>> Open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  uint32_t chunk_size() const { return chunk_size_; }

  // Committed capture ids (read from refs/ on every call: captures the
  // daemon commits later show up).
  absl::StatusOr<std::vector<std::string>> ListCaptureIds() const;
  // A full id or a unique prefix; NotFound / InvalidArgument (malformed,
  // ambiguous) otherwise, with the same messages as Store::ResolveCaptureId.
  absl::StatusOr<std::string> ResolveCaptureId(absl::string_view id_or_prefix) const;
  absl::StatusOr<v1::CaptureManifest> GetManifest(absl::string_view id_or_prefix) const;
  // Loads the capture's manifest and opens the packs holding its chunks
  // (see the top of this file for how this interacts with GC).
  absl::StatusOr<std::unique_ptr<StoreCapture>> OpenCapture(absl::string_view id_or_prefix) const;

 private:
  StoreReader(std::string dir, uint32_t chunk_size)
      : dir_(std::move(dir)), chunk_size_(chunk_size), manifests_(dir_) {}

  std::string dir_;
  uint32_t chunk_size_;
  // Only its read methods are used (ReadRef, ReadManifest, ListRefs).
  mutable ManifestStore manifests_;
};

}  // namespace kerncap::store

#endif  // KERNCAP_FORMAT_STORE_READER_H_
