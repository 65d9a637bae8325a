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
#ifndef KERNCAP_REPRODUCER_REPLAY_RESTORE_PIPELINE_H_
#define KERNCAP_REPRODUCER_REPLAY_RESTORE_PIPELINE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reproducer/replay/relocator.h"

namespace kerncap::replay {

// One chunk to restore.
struct RestoreTask {
  const std::string* digest = nullptr;  // 32 raw bytes; empty: all-zero chunk
  uint32_t size = 0;
  uint64_t dst = 0;      // replay address (device, or host pointer when host)
  uint64_t src_va = 0;   // captured address of the chunk (relocation patching)
  bool host = false;     // destination is host memory (no staging, no copy)
};

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
};

// Fills `out` (task.size bytes) with the chunk's verified raw bytes; called
// concurrently from the workers.
using ChunkReader = std::function<absl::Status(const RestoreTask& task, char* out)>;

// Staging bytes RunRestorePipeline needs for `tasks` under `options`
// (slots * slot_bytes, after defaults); 0 when no task needs staging.
size_t RestoreStagingBytes(const std::vector<RestoreTask>& tasks,
                           const RestorePipelineOptions& options);

// Restores every task. `staging` holds RestoreStagingBytes() bytes (pinned
// for real copies). `relocator` may be null or empty (no patching). Returns
// after Drain(); on error, after the workers stopped and what was enqueued
// drained, with the first error.
absl::StatusOr<RestorePipelineStats> RunRestorePipeline(const std::vector<RestoreTask>& tasks,
                                                        const ChunkReader& read,
                                                        const Relocator* relocator,
                                                        RestoreCopier* copier, char* staging,
                                                        const RestorePipelineOptions& options);

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_RESTORE_PIPELINE_H_
