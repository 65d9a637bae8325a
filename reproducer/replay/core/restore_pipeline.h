// restore_pipeline.h: the pipelined pre-image restore of kerncap-replay.
//
// Worker threads read, verify (XXH3 + SHA-256) and decompress chunks into a
// ring of staging slots (pinned host memory in the session), several chunks
// with consecutive destinations per slot, and submit each slot's bytes as
// asynchronous copies; a slot is reused only after its copies completed
// (the copier's per-slot event). All-zero device chunks become an
// asynchronous memset (no host traffic); chunks of host-resident regions are
// decoded straight into their destination. Nothing here calls CUDA: the
// device side is a RestoreCopier, so the ordering/recycling logic is unit
// tested with a fake one.
//
// Device memory may become usable while the restore runs: the session maps
// physical memory (cuMemCreate + cuMemMap + cuMemSetAccess) on a mapping
// thread, in task order, and publishes its progress in a MappingProgress.
// Every device task names the mapping it needs (`mapping`, an ordinal in
// mapping order); with a MappingProgress the pipeline enqueues a copy or a
// memset only after that mapping is published (workers still read, verify
// and decompress into staging meanwhile), so the wall time approaches
// max(map, upload) instead of their sum.
#ifndef KERNCAP_REPRODUCER_REPLAY_CORE_RESTORE_PIPELINE_H_
#define KERNCAP_REPRODUCER_REPLAY_CORE_RESTORE_PIPELINE_H_

#include <cstddef>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reproducer/replay/core/relocator.h"

namespace kerncap::replay {

// One chunk to restore.
struct RestoreTask {
  const std::string* digest = nullptr;  // 32 raw bytes; empty: all-zero chunk
  uint32_t size = 0;
  uint64_t dst = 0;      // replay address (device, or host pointer when host)
  uint64_t src_va = 0;   // captured address of the chunk (relocation patching)
  bool host = false;     // destination is host memory (no staging, no copy)
  // Device tasks: the ordinal (in mapping order) of the mapping holding dst;
  // with a MappingProgress nothing is enqueued at dst before it is published.
  uint32_t mapping = 0;
};

// Progress of a mapper that makes mappings 0, 1, 2, ... usable in order:
// "mapped up to n" (mappings [0, n) are usable), or the mapper's error. Thread
// safe; the waiters are the restore workers.
class MappingProgress {
 public:
  // Mappings [0, n) are usable (n never decreases; a smaller n is ignored).
  void Publish(size_t n);
  // The mapper stopped: waiters for mappings not yet published get `error`.
  void Fail(absl::Status error);
  // Blocks until mapping `ordinal` is usable; the mapper's error when it
  // failed before publishing it.
  absl::Status WaitMapped(size_t ordinal);
  size_t mapped() const;
  // Seconds WaitMapped callers spent blocked, summed over threads.
  double wait_seconds() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  size_t mapped_ = 0;
  absl::Status error_;
  double wait_seconds_ = 0;
};

// Runs map_one(0), map_one(1), ... map_one(count - 1) in order, publishing
// "mapped up to i + 1" after each success; on the first error stops, calls
// progress->Fail and returns it. Also stops (Cancelled, nothing published
// further) once *cancel becomes true. The mapping thread's body.
absl::Status MapInOrder(size_t count, const std::function<absl::Status(size_t)>& map_one,
                        MappingProgress* progress, const std::atomic<bool>* cancel = nullptr);

// The device side. CopyAsync/ZeroAsync/SlotSubmitted/Drain are called under
// one lock (never concurrently); WaitSlot may run concurrently with them.
class RestoreCopier {
 public:
  virtual ~RestoreCopier() = default;
  // Called once by every worker thread before its first call (cuCtxSetCurrent).
  virtual absl::Status BindThread() { return absl::OkStatus(); }
  // Enqueues a copy of `size` bytes at `src` (inside staging slot `slot`) to `dst`.
  virtual absl::Status CopyAsync(int slot, uint64_t dst, const void* src, size_t size) = 0;
  // The slot's copies are all enqueued (record its event).
  virtual absl::Status SlotSubmitted(int slot) = 0;
  // Blocks until the copies of the slot's last submission have completed.
  virtual absl::Status WaitSlot(int slot) = 0;
  // Enqueues a fill of `size` zero bytes at device address `dst`.
  virtual absl::Status ZeroAsync(uint64_t dst, size_t size) = 0;
  // Blocks until everything enqueued has completed.
  virtual absl::Status Drain() = 0;
};

struct RestorePipelineOptions {
  int workers = 0;                   // 0: hardware threads (at most 32)
  int slots = 0;                     // 0: workers + 4
  size_t slot_bytes = 8u << 20;      // raised to the largest chunk when smaller
};

struct RestorePipelineStats {
  uint64_t bytes = 0;          // every task's bytes (zero chunks included)
  uint64_t copied_bytes = 0;   // through staging to the device
  uint64_t zero_bytes = 0;     // device memsets
  uint64_t host_bytes = 0;     // decoded straight into host regions
  uint64_t copies = 0;         // CopyAsync calls
  uint64_t patched_words = 0;
  int workers = 0;
  double seconds = 0;
  double map_wait_seconds = 0;  // workers blocked on the MappingProgress, summed
};

// Fills `out` (task.size bytes) with the chunk's verified raw bytes; called
// concurrently from the workers.
using ChunkReader = std::function<absl::Status(const RestoreTask& task, char* out)>;

// Staging bytes RunRestorePipeline needs for `tasks` under `options`
// (slots * slot_bytes, after defaults); 0 when no task needs staging.
size_t RestoreStagingBytes(const std::vector<RestoreTask>& tasks,
                           const RestorePipelineOptions& options);

// Restores every task. `staging` holds RestoreStagingBytes() bytes (pinned
// for real copies). `relocator` may be null or empty (no patching); its
// placements must all be known (Finalize()d) before the call — the session
// knows every placement once the ranges are reserved, before any mapping.
// `mapping` may be null (all device memory already usable); else every
// CopyAsync/ZeroAsync whose destination lies in task.mapping waits for
// mapping->WaitMapped(task.mapping). Tasks are best given in mapping order
// (the pipeline keeps their order: zero runs and staged batches are
// enqueued as the workers reach them). Returns after Drain(); on error,
// after the workers stopped and what was enqueued drained, with the first
// error (a mapping error included). `tally` (may be null) counts the patched
// pointer words per moved range.
absl::StatusOr<RestorePipelineStats> RunRestorePipeline(const std::vector<RestoreTask>& tasks,
                                                        const ChunkReader& read,
                                                        const Relocator* relocator,
                                                        RestoreCopier* copier, char* staging,
                                                        const RestorePipelineOptions& options,
                                                        MappingProgress* mapping = nullptr,
                                                        PatchTally* tally = nullptr);

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CORE_RESTORE_PIPELINE_H_
