// pack_appender.h: the store's one open pack, which every ingest appends to
// (so concurrent ingests dedup against each other's new chunks), and the
// sealer thread that makes full packs durable.
//
// A chunk appended here is pending under the sequence number of its pack
// until that pack is sealed (PackWriter::Finish: fdatasync, rename, fsync of
// the folder) and published through the publish callback; then it is the
// index's. A full pack is detached and handed to the sealer, so workers keep
// compressing into the next pack while the full one is fsynced. An ingest
// that references a pending chunk makes its pack durable (EnsureDurable)
// before its manifest is written. A pack whose write fails fails every
// ingest that depends on it, never silently.
#ifndef KERNCAP_DAEMON_STORE_PACK_APPENDER_H_
#define KERNCAP_DAEMON_STORE_PACK_APPENDER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/digest.h"
#include "daemon/store/pack_writer.h"
#include "format/pack_reader.h"

namespace kerncap::store {

class PackAppender {
 public:
  // Publishes a durable pack: its reader and its entries, which must be in
  // the index when this returns (before they stop being pending). Called
  // with the appender's lock held.
  using PublishFn = std::function<void(std::unique_ptr<PackReader> reader,
                                       const std::vector<PackEntry>& entries)>;

  // Pack sequence numbers are first_seq, first_seq + seq_stride, ... (the
  // striped appender gives each stripe its own residue: striped_appender.h).
  PackAppender(std::string packs_dir, uint64_t pack_target_bytes, TestHook test_hook,
               PublishFn publish, uint64_t first_seq = 1, uint64_t seq_stride = 1);
  ~PackAppender();  // Stop()
  PackAppender(const PackAppender&) = delete;
  PackAppender& operator=(const PackAppender&) = delete;

  void Start();  // the sealer thread
  // Drops the open pack (only chunks of uncommitted ingests can be in it:
  // a commit seals what it needs), lets the sealer finish the packs already
  // queued, and joins it.
  void Stop();

  // Appends a stored chunk to the open pack (creating one if needed) and
  // marks it pending; hands the pack to the sealer when it reaches
  // pack_target_bytes. Returns the sequence number of its pack.
  absl::StatusOr<uint64_t> Append(const Digest& d, uint8_t codec, absl::string_view stored,
                                  uint32_t raw_len, uint64_t xxh3);
  // Returns once pack `seq` is durable (sealing it here if it is the open
  // pack); the pack's failure status if its write failed.
  absl::Status EnsureDurable(uint64_t seq);
  // The sequence number of `d`'s pack while it is pending.
  bool FindPending(const Digest& d, uint64_t* seq);
  // Runs `f` with no seal publishing meanwhile.
  void WithoutSeals(absl::FunctionRef<void()> f);

 private:
  // Sealer jobs: seal a detached pack, or start writeback of a range of the
  // open one (wb_fd is a dup, closed by the sealer).
  struct SealJob {
    uint64_t seq = 0;
    std::unique_ptr<PackWriter> pack;
    int wb_fd = -1;
    uint64_t wb_offset = 0;
    uint64_t wb_len = 0;
  };

  void SealerLoop();
  void QueueWritebackLocked(int fd, uint64_t offset, uint64_t len)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the open pack out for sealing (marks its seq as sealing).
  std::unique_ptr<PackWriter> DetachOpenPackLocked(uint64_t* seq)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finishes a detached pack and publishes (or fails) its chunks. Called
  // without mu_ held: the fsync must not block appends.
  absl::Status SealDetached(std::unique_ptr<PackWriter> pack, uint64_t seq)
      ABSL_LOCKS_EXCLUDED(mu_);
  void FailOpenPackLocked(const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops chunks from pending_ (they were published or their pack failed).
  void DropPendingLocked(const std::vector<PackEntry>& entries) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string packs_dir_;
  const uint64_t pack_target_bytes_;
  const TestHook test_hook_;
  const PublishFn publish_;
  const uint64_t seq_stride_;

  absl::Mutex mu_;
  absl::CondVar sealed_cv_;  // a pack left sealing_, or a job was queued
  std::unique_ptr<PackWriter> open_pack_ ABSL_GUARDED_BY(mu_);
  uint64_t open_seq_ ABSL_GUARDED_BY(mu_);
  // Lock order mu_ -> pending_mu_: pending_ changes only under both (so a
  // seal's publish-then-drop stays ordered), lookups take pending_mu_ alone.
  absl::Mutex pending_mu_ ABSL_ACQUIRED_AFTER(mu_);
  absl::flat_hash_map<Digest, uint64_t> pending_ ABSL_GUARDED_BY(pending_mu_);
  absl::flat_hash_map<uint64_t, absl::Status> failed_packs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> sealing_ ABSL_GUARDED_BY(mu_);
  std::deque<SealJob> seal_queue_ ABSL_GUARDED_BY(mu_);
  bool sealer_stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sealer_;
};

}  // namespace kerncap::store

#endif  // KERNCAP_DAEMON_STORE_PACK_APPENDER_H_
