// store_impl.h: private state of Store, shared by store.cc (open, captures,
// reads), ingest.cc (the chunk pipeline), gc.cc and verify.cc. Not part of
// the store's interface.
//
// Where a chunk can be, and how it moves (all transitions keep dedup safe):
//   in-flight  a worker claimed the digest and is compressing/appending it
//              (inflight_); others wanting the same digest wait for it
//   pending    appended to the open pack, not durable yet (pending_)
//   indexed    its pack is published; visible in index_ (dedup target)
// An ingest that references a pending chunk records the pack's sequence
// number and, at Commit, makes that pack durable before writing its manifest.
//
// Lock order (never acquire leftwards while holding rightwards):
//   gc_mu_ -> live_mu_ -> inflight_mu_ -> write_mu_ -> packs_mu_ -> index shards
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
#include "format/codec.h"
#include "format/manifest_store.h"
#include "format/pack_reader.h"
#include "daemon/store/pack_writer.h"
#include "daemon/store/store.h"
#include "format/store_reader.h"  // ForEachManifestChunk

namespace kerncap::store {

class IngestImpl;

// Calls `on_consumed` once every chunk of one WriteRegion call is processed.
struct WriteGroup {
  explicit WriteGroup(int n, std::function<void()> cb) : remaining(n), on_consumed(std::move(cb)) {}
  std::atomic<int> remaining;
  std::function<void()> on_consumed;
  void Done() {
    if (remaining.fetch_sub(1) == 1 && on_consumed) on_consumed();
  }
};

struct ChunkTask {
  IngestImpl* ingest = nullptr;
  int slot = 0;
  uint32_t chunk = 0;
  const char* data = nullptr;
  uint32_t size = 0;
  std::shared_ptr<WriteGroup> group;
};

class Store::Impl {
 public:
  explicit Impl(StoreOptions options);
  ~Impl();

  absl::Status Open();
  // Removes manifests no ref names (left by a crash between manifest and
  // ref write, or between ref and manifest delete). Returns how many.
  int RemoveOrphanManifests(const std::vector<std::string>& refs);

  // ---- chunk pipeline (ingest.cc) ----
  // Queues a chunk; blocks while max_inflight_bytes are already queued.
  void Submit(ChunkTask task);
  void WorkerLoop();
  // Copies the chunk out of the producer's memory into `private_copy`,
  // releases the producer's bytes, then zero-checks, hashes, dedups,
  // compresses (into `scratch`) and appends it, all from the private copy.
  void ProcessChunk(const ChunkTask& task, ChunkCompressor& compressor, std::string& scratch,
                    std::string& private_copy);

  // Appends a stored chunk to the open pack (creating one if needed) and
  // marks it pending; seals the pack when it reaches pack_target_bytes.
  // Returns the sequence number of the pack it went into.
  absl::StatusOr<uint64_t> AppendChunk(const Digest& d, uint8_t codec, absl::string_view stored,
                                       uint32_t raw_len, uint64_t xxh3);
  // Returns once pack `seq` is durable (sealing it if it is the open pack);
  // the pack's failure status if its write failed.
  absl::Status EnsureDurable(uint64_t seq);
  // Where a digest is now: indexed (true, seq 0), pending (true, seq > 0) or
  // absent (false).
  bool FindStored(const Digest& d, uint64_t* pending_seq);

  // Records that `owner` (an IngestImpl, or any token registered with
  // RegisterIngest; null: nobody) references `d`, so GC keeps it while the
  // owner is registered, and (when a GC is marking) until that GC ends.
  void NoteReference(const void* owner, const Digest& d);
  void RegisterIngest(const void* owner);
  void UnregisterIngest(const void* owner);
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

  absl::Mutex packs_mu_ ABSL_ACQUIRED_AFTER(write_mu_);
  // Published packs by id; null where GC deleted one. Ids are never reused.
  std::vector<std::shared_ptr<PackReader>> packs_ ABSL_GUARDED_BY(packs_mu_);
  std::vector<std::string> quarantined_ ABSL_GUARDED_BY(packs_mu_);

  // The one open pack all ingests append to (so concurrent ingests dedup
  // against each other's new chunks). A full pack is detached (its chunks
  // stay in pending_ under its sequence number) and handed to the sealer
  // thread, so workers keep compressing into the next pack while the full
  // one is fsynced.
  absl::Mutex write_mu_ ABSL_ACQUIRED_AFTER(inflight_mu_);
  absl::CondVar sealed_cv_;  // a pack left sealing_
  std::unique_ptr<PackWriter> open_pack_ ABSL_GUARDED_BY(write_mu_);
  uint64_t open_seq_ ABSL_GUARDED_BY(write_mu_) = 1;
  absl::flat_hash_map<Digest, uint64_t> pending_ ABSL_GUARDED_BY(write_mu_);
  absl::flat_hash_map<uint64_t, absl::Status> failed_packs_ ABSL_GUARDED_BY(write_mu_);
  absl::flat_hash_set<uint64_t> sealing_ ABSL_GUARDED_BY(write_mu_);
  // Sealer jobs: seal a detached pack, or start writeback of a range of the
  // open one (wb_fd is a dup, closed by the sealer).
  struct SealJob {
    uint64_t seq = 0;
    std::unique_ptr<PackWriter> pack;
    int wb_fd = -1;
    uint64_t wb_offset = 0;
    uint64_t wb_len = 0;
  };
  std::deque<SealJob> seal_queue_ ABSL_GUARDED_BY(write_mu_);
  void QueueWritebackLocked(int fd, uint64_t offset, uint64_t len)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  bool sealer_stop_ ABSL_GUARDED_BY(write_mu_) = false;
  std::thread sealer_;
  void SealerLoop();
  // Takes the open pack out for sealing (marks its seq as sealing).
  std::unique_ptr<PackWriter> DetachOpenPackLocked(uint64_t* seq)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Finishes a detached pack and publishes (or fails) its chunks. Called
  // without write_mu_ held: the fsync must not block appends.
  absl::Status SealDetached(std::unique_ptr<PackWriter> pack, uint64_t seq)
      ABSL_LOCKS_EXCLUDED(write_mu_);
  void FailOpenPackLocked(const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  // Digests some worker is writing right now.
  absl::Mutex inflight_mu_ ABSL_ACQUIRED_AFTER(live_mu_);
  absl::CondVar inflight_cv_;
  absl::flat_hash_set<Digest> inflight_ ABSL_GUARDED_BY(inflight_mu_);

  // GC pins: what every in-flight ingest references, plus (while a GC runs)
  // everything referenced or written since its mark began.
  absl::Mutex live_mu_ ABSL_ACQUIRED_AFTER(gc_mu_);
  absl::flat_hash_map<const void*, absl::flat_hash_set<Digest>> ingest_refs_
      ABSL_GUARDED_BY(live_mu_);
  bool gc_active_ ABSL_GUARDED_BY(live_mu_) = false;
  absl::flat_hash_set<Digest> gc_seen_ ABSL_GUARDED_BY(live_mu_);
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

  // Pipeline queue. inflight_bytes_ counts bytes from Submit until the chunk
  // is processed, which is what bounds the caller's memory.
  absl::Mutex queue_mu_;
  absl::CondVar queue_cv_;
  std::deque<ChunkTask> queue_ ABSL_GUARDED_BY(queue_mu_);
  uint64_t queued_bytes_ ABSL_GUARDED_BY(queue_mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace kerncap::store

#endif  // KERNCAP_DAEMON_STORE_STORE_IMPL_H_
