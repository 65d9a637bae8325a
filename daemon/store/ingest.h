// ingest.h: one capture being ingested (the store's CaptureIngest).
//
// WriteRegion cuts the caller's bytes into chunk tasks for the store's
// worker pool (zero check -> SHA-256 -> dedup -> zstd -> pack append) and
// returns; the pool calls on_consumed when the last chunk of that write is
// done. Commit waits for the ingest's chunks, makes the packs they live in
// durable, builds the manifest (post-dispatch regions become per-chunk diffs
// against the pre region at the same va) and publishes it.
//
// Thread-safety: all methods may be called concurrently; workers report
// results through ChunkDone.
#ifndef KERNCAP_DAEMON_STORE_INGEST_H_
#define KERNCAP_DAEMON_STORE_INGEST_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/capture_sink.h"
#include "daemon/store/store_impl.h"

namespace kerncap::store {

class IngestImpl : public CaptureIngest {
 public:
  explicit IngestImpl(Store::Impl* store);
  ~IngestImpl() override;

  absl::StatusOr<int> AddRegion(ImageKind image, const v1::Region& region) override;
  absl::Status WriteRegion(int handle, uint64_t offset, const void* data, size_t size,
                           std::function<void()> on_consumed) override;
  absl::Status MarkUnchanged(int handle, uint64_t first_chunk, uint64_t count) override;
  absl::Status MarkKnown(int handle, uint64_t first_chunk,
                         const std::vector<Digest>& digests) override;
  bool HoldsChunk(const Digest& digest) override;
  absl::StatusOr<std::vector<Digest>> CommittedDigests(int handle) const override;
  absl::Status AddCodeObject(const v1::CodeObject& meta, const void* data, size_t size) override;
  absl::StatusOr<std::string> Commit(v1::CaptureManifest manifest) override;
  void Abort(absl::string_view reason) override;
  IngestProgress Progress() const override;

  // ---- called by the worker pool ----
  // True when the ingest failed or was aborted: workers then skip its chunks.
  bool Dead() const;
  // Outcome of one chunk. `digest` all-zero bytes means a zero chunk.
  // `new_stored` > 0 when this ingest wrote it; `pack_seq` > 0 when the
  // chunk's pack must be durable before Commit.
  void ChunkDone(int slot, uint32_t chunk, const Digest& digest, uint32_t raw, uint32_t new_stored,
                 uint64_t pack_seq, absl::Status status);

 private:
  struct Slot {
    bool is_code = false;
    ImageKind image = ImageKind::kPre;
    v1::Region region;    // regions
    v1::CodeObject code;  // code objects
    uint64_t size = 0;
    std::vector<Digest> digests;  // all-zero digest = zero chunk
    std::vector<uint8_t> received;
    uint32_t received_count = 0;
    // Post regions: chunks MarkUnchanged declared equal to pre slot `same_as`
    // (their digests are copied from it at Commit).
    std::vector<uint8_t> unchanged;
    int same_as = -1;
  };
  struct Written {
    uint32_t raw = 0;
    uint32_t stored = 0;
  };

  uint32_t NumChunks(uint64_t size) const;
  absl::Status Usable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SubmitChunks(int slot, uint64_t offset, const char* data, size_t size,
                    std::function<void()> on_consumed);
  v1::ChunkList MakeList(const Slot& s, const std::vector<uint32_t>* only) const;

  Store::Impl* const store_;
  const uint32_t chunk_size_;
  const absl::Time start_;

  mutable absl::Mutex mu_;
  absl::CondVar done_cv_;  // signalled when outstanding_ drops to 0
  std::vector<std::unique_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  uint64_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;  // chunks submitted, not done
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool committed_ ABSL_GUARDED_BY(mu_) = false;
  bool committing_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<Digest, Written> written_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> pack_deps_ ABSL_GUARDED_BY(mu_);
  IngestProgress progress_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kerncap::store

#endif  // KERNCAP_DAEMON_STORE_INGEST_H_
