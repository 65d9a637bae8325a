// store_impl.h: private state of Store, shared by store.cc (open, captures,
// reads), ingest.cc (per-chunk work, ingests), gc.cc and verify.cc. Not part
// of the store's interface. The parts with one job each: the worker pool
// (chunk_pipeline.h), the open packs and their sealers (striped_appender.h
// over pack_appender.h), the
// digests being written (digest_claims.h) and what GC must keep
// (gc_pins.h).
//
// Where a chunk can be, and how it moves (all transitions keep dedup safe):
//   in-flight  a worker claimed the digest and is compressing/appending it
//              (claims_); others wanting the same digest wait for it
//   pending    appended to an open pack, not durable yet (appender_)
//   indexed    its pack is published; visible in index_ (dedup target)
// An ingest that references a pending chunk records the pack's sequence
// number and, at Commit, makes that pack durable before writing its manifest.
//
// Lock order (never acquire leftwards while holding rightwards):
//   gc_mu_ -> pins_ -> claims_ -> appender_ -> packs_mu_ -> index shards
// (pins_, claims_ and appender_: the mutex inside each, the appender's
// stripes in index order; a stripe calls its publish callback, which takes
// packs_mu_ and the index, under its own.)
#ifndef KERNCAP_DAEMON_STORE_STORE_IMPL_H_
#define KERNCAP_DAEMON_STORE_STORE_IMPL_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "daemon/store/catalog.h"
#include "daemon/store/chunk_index.h"
#include "daemon/store/chunk_pipeline.h"
#include "daemon/store/digest_claims.h"
#include "daemon/store/gc_pins.h"
#include "daemon/store/striped_appender.h"
#include "daemon/store/pack_writer.h"
#include "daemon/store/store.h"
#include "format/codec.h"
#include "format/manifest_store.h"
#include "format/pack_reader.h"
#include "format/store_reader.h"  // ForEachManifestChunk

namespace kerncap::store {

class Store::Impl {
 public:
  explicit Impl(StoreOptions options);
  ~Impl();

  absl::Status Open();
  // Removes manifests no ref names (left by a crash between manifest and
  // ref write, or between ref and manifest delete). Returns how many.
  int RemoveOrphanManifests(const std::vector<std::string>& refs);
  absl::StatusOr<int> ReconcileCatalog(const std::vector<std::string>& refs);

  // ---- per-chunk work (ingest.cc) ----
  // Copies the chunk out of the producer's memory into `private_copy`,
  // releases the producer's bytes, then zero-checks, hashes, dedups,
  // compresses (into `scratch`) and appends it, all from the private copy.
  // Run by the pipeline's workers.
  void ProcessChunk(const ChunkTask& task, ChunkCompressor& compressor, std::string& scratch,
                    std::string& private_copy);
  // Where a digest is now: indexed (true, seq 0), pending (true, seq > 0) or
  // absent (false).
  bool FindStored(const Digest& d, uint64_t* pending_seq);
  // A durable pack's publication (the appender's publish callback): the
  // pack joins packs_, its chunks the index.
  void PublishPack(std::unique_ptr<PackReader> reader, const std::vector<PackEntry>& entries);
  void Hook(absl::string_view point) {
    if (opts_.test_hook) opts_.test_hook(point);
  }

  // ---- reads (store.cc) ----
  // The stored form (export) and the verified raw bytes (chunk_read.h) of a
  // chunk; Missing is what either says for a digest the index lacks.
  absl::StatusOr<StoredChunk> ReadStored(const Digest& d, std::string* pack_name);
  absl::Status ReadChunkInto(const Digest& d, char* out, uint32_t expected_raw);
  absl::Status Missing(const Digest& d);
  std::shared_ptr<PackReader> GetPack(uint32_t id);
  uint32_t AddPack(std::shared_ptr<PackReader> pack);

  // ---- captures (store.cc) ----
  absl::StatusOr<std::string> Resolve(absl::string_view id_or_prefix);
  absl::StatusOr<v1::CaptureManifest> LoadManifest(const std::string& id);
  // Writes manifest then ref, records in catalog and id set. Chunks must be
  // durable already.
  absl::StatusOr<std::string> PublishManifest(v1::CaptureManifest manifest);

  absl::StatusOr<v1::GcReport> RunGc(bool dry_run);  // gc.cc
  // Copies the live chunks of pack `id` into a new pack, publishes it, moves
  // their index entries, then deletes the old pack.
  absl::Status RewritePack(uint32_t id, const std::shared_ptr<PackReader>& pack);
  absl::Status DeletePack(uint32_t id, const std::shared_ptr<PackReader>& pack);
  absl::Status Verify(absl::string_view capture_id, bool rehash,
                      const std::function<void(const v1::VerifyProgress&)>& progress);  // verify.cc

  StoreOptions opts_;
  std::string abs_dir_;  // opts_.dir made absolute at Open (reported by Stats)
  std::string packs_dir_;
  int lock_fd_ = -1;
  ManifestStore manifests_;
  std::unique_ptr<Catalog> catalog_;
  ChunkIndex index_;
  std::string catalog_path_;

  absl::Mutex packs_mu_;
  // Published packs by id; null where GC deleted one. Ids are never reused.
  std::vector<std::shared_ptr<PackReader>> packs_ ABSL_GUARDED_BY(packs_mu_);
  std::vector<std::string> quarantined_ ABSL_GUARDED_BY(packs_mu_);

  // The open pack and its sealer; what is being written; what GC keeps.
  std::unique_ptr<StripedAppender> appender_;
  DigestClaims claims_;
  GcPins pins_;
  absl::Mutex gc_mu_;  // one GC at a time

  // Per-chunk reference counts over committed captures, so a capture's
  // footprint costs its own chunks, not the whole store. Counted once in the
  // background after Open (RefCountBuilder), then by every publish and
  // delete; refs_counted_ says which captures are in the counts.
  absl::Mutex refs_mu_ ABSL_ACQUIRED_BEFORE(ids_mu_);
  absl::flat_hash_map<Digest, uint32_t> refcount_ ABSL_GUARDED_BY(refs_mu_);
  absl::flat_hash_set<std::string> refs_counted_ ABSL_GUARDED_BY(refs_mu_);
  bool refs_ready_ ABSL_GUARDED_BY(refs_mu_) = false;
  std::atomic<bool> refs_stop_{false};
  std::thread refs_builder_;
  void RefCountBuilder();
  // Adds (+1) or removes (-1) the distinct chunks of capture `id`.
  void CountCaptureLocked(const std::string& id, const v1::CaptureManifest& m, int delta)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(refs_mu_);

  absl::Mutex ids_mu_;
  std::set<std::string> ids_ ABSL_GUARDED_BY(ids_mu_);
  // Ids being published (manifest written, ref not yet): not resolvable,
  // but not available to another commit either.
  std::set<std::string> reserved_ids_ ABSL_GUARDED_BY(ids_mu_);

  // The worker pool (started by Open).
  std::unique_ptr<ChunkPipeline> pipeline_;
};

}  // namespace kerncap::store

#endif  // KERNCAP_DAEMON_STORE_STORE_IMPL_H_
