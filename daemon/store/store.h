// store.h: kerncapd's content-addressed capture store (the facade the rest of
// the daemon uses). Layout of a store directory:
//
//   <dir>/LOCK                  flock()ed by the one daemon that owns the store
//   <dir>/packs/<xx>/<name>.pack   append-only pack files (pack_format.h)
//   <dir>/manifests/<xx>/<sha256-hex>   CaptureManifest protobufs, by digest
//   <dir>/refs/captures/<capture id>    text: manifest digest hex + "\n"
//   <dir>/catalog.sqlite        query index, rebuildable from refs
//   <dir>/STORE                 "format=1\nchunk_size=<n>\n" (fixed at creation)
//   <dir>/packs/quarantine/     packs whose trailer was invalid at Open
//   tmp-* files anywhere are leftovers of interrupted writes, removed on Open.
//
// A capture exists iff its ref exists; the ref is written last (after packs
// and manifest are durable), so a crash never exposes a partial capture.
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef KERNCAP_DAEMON_STORE_STORE_H_
#define KERNCAP_DAEMON_STORE_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/digest.h"
#include "daemon/capture_sink.h"
#include "kerncap/v1/control.pb.h"
#include "kerncap/v1/manifest.pb.h"

namespace kerncap::store {

class IngestImpl;  // ingest.h

struct StoreOptions {
  std::string dir;
  // Power of two in [64 KiB, 4 MiB]. Fixed when the store is created;
  // reopening with another value is FailedPrecondition.
  uint32_t chunk_size = 1u << 20;
  int workers = 0;  // ingest workers; 0 = number of CPUs
  // Packs open for appends at a time (striped_appender.h); 0 = one per four
  // workers, between 1 and 4.
  int append_stripes = 0;
  uint64_t pack_target_bytes = 256ull << 20;
  int zstd_level = 1;
  // Bytes of chunk data allowed in flight inside the ingest pipeline before
  // WriteRegion blocks (backpressure).
  uint64_t max_inflight_bytes = 256ull << 20;
  // GC rewrites a pack when more than this fraction of its blob bytes is
  // dead (restic prunes at 5 %, borg compacts at 10 %).
  double gc_rewrite_threshold = 0.10;
  // Test-only: called at named points of the write protocol
  // ("pack.chunk_appended", "pack.before_rename", "commit.before_ref", ...)
  // so fault tests can kill the process at an exact step. Null in production.
  std::function<void(absl::string_view point)> test_hook;
};

// A chunk as it sits in a pack: what export sends and import receives.
struct StoredChunk {
  v1::ChunkCodec codec = v1::CODEC_RAW;
  uint32_t raw_size = 0;
  std::string data;
};

class Store : public CaptureSink {
  class Impl;

 public:
  // Opens or creates the store at options.dir. Takes the directory lock
  // (FailedPrecondition naming the holder's pid if another daemon has it),
  // removes tmp-* leftovers, and loads the chunk index from pack trailers.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const StoreOptions& options);

  ~Store() override;

  // CaptureSink: starts a new capture ingest (see capture_sink.h).
  absl::StatusOr<std::unique_ptr<CaptureIngest>> BeginCapture() override;

  // ---- captures ----
  // Accepts a full id or a unique prefix ("cap-7f3a"). NotFound / InvalidArgument
  // (ambiguous prefix, malformed id) otherwise.
  absl::StatusOr<std::string> ResolveCaptureId(absl::string_view id_or_prefix);
  absl::StatusOr<v1::CaptureManifest> GetManifest(absl::string_view id_or_prefix);
  // `owner_uid` set: only that user's captures (CaptureManifest.owner_uid).
  absl::StatusOr<std::vector<v1::CaptureSummary>> ListCaptures(
      const v1::ListCapturesRequest& filter, std::optional<uint32_t> owner_uid = std::nullopt);
  // Removes the ref (durably) and the catalog row; chunks are freed by GC.
  absl::Status DeleteCapture(absl::string_view id_or_prefix);
  // What a capture occupies. Costs the capture's own chunks (per-chunk
  // reference counts are kept for all captures), never a read of the others.
  struct Footprint {
    uint64_t exclusive_raw_bytes = 0;  // raw bytes no other capture references
    uint64_t stored_bytes = 0;         // stored size of all its chunks
    // False while the counts are still being built after Open (then
    // exclusive_raw_bytes is 0 and means nothing).
    bool exclusive_known = false;
  };
  absl::StatusOr<Footprint> CaptureFootprint(absl::string_view id);

  // ---- chunks ----
  bool HasChunk(const Digest& digest);
  // Raw bytes, verified on the way out (XXH3 of stored bytes, then zstd's
  // frame checksum). DataLoss names the pack and the chunk.
  absl::StatusOr<std::string> ReadChunk(const Digest& digest);
  absl::StatusOr<StoredChunk> ReadStoredChunk(const Digest& digest);
  // Adds a chunk received from elsewhere. Decompresses and checks its SHA-256
  // against `digest` (DataLoss on mismatch). No-op if already present.
  absl::Status PutStoredChunk(const Digest& digest, const StoredChunk& chunk);
  // Reads a whole ChunkList (zero chunks expanded) into out[0, list.size()).
  absl::Status ReadChunkList(const v1::ChunkList& list, void* out, size_t out_size);

  // Makes a manifest whose chunks are all present visible (import path).
  // FailedPrecondition names the first missing chunk.
  absl::StatusOr<std::string> CommitImportedManifest(v1::CaptureManifest manifest);

  // Keeps every chunk `manifest` references alive while an import of it is
  // in flight: chunks it writes (PutStoredChunk) and chunks already present
  // it relies on survive any GC until the pin is dropped (after
  // CommitImportedManifest, or when the import fails). A chunk GC collected
  // before the pin was taken is simply absent: the commit then says so.
  class ImportPin {
   public:
    ~ImportPin();
    ImportPin(const ImportPin&) = delete;
    ImportPin& operator=(const ImportPin&) = delete;

   private:
    friend class Store;
    explicit ImportPin(Impl* impl) : impl_(impl) {}
    Impl* impl_;
  };
  std::unique_ptr<ImportPin> PinForImport(const v1::CaptureManifest& manifest);

  // ---- maintenance ----
  // Mark and sweep. Chunks of in-flight ingests are never freed.
  absl::StatusOr<v1::GcReport> RunGc(bool dry_run);
  // Checks every chunk reachable from the capture (or the whole store when
  // capture_id is empty); rehash also recomputes SHA-256. Calls `progress`
  // periodically and once at the end (done=true). Returns OK even when
  // problems are found (they are reported through `progress`); errors only
  // for bad arguments.
  absl::Status Verify(absl::string_view capture_id, bool rehash,
                      const std::function<void(const v1::VerifyProgress&)>& progress);
  v1::StoreStats Stats();
  uint32_t chunk_size() const;
  int ingests_in_flight() const;

 private:
  friend class IngestImpl;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kerncap::store

#endif  // KERNCAP_DAEMON_STORE_STORE_H_
