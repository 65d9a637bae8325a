// l2_control.h: the L2 state a benchmark times with, the same for every
// benchmark (kerncap-replay bench, serve's evaluate, the C API's bench).
//
// Persisting L2: a previous user of the context (the application, torch, an
// earlier benchmark in the same process) may have set aside L2 for
// persisting accesses (cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE)),
// left persisting lines in it, or put an access-policy window on a stream.
// Times taken with part of L2 set aside, or with another binary's lines
// pinned, are not comparable. ResetPersistingL2 sets the limit to 0, resets
// the persisting lines and clears the launch stream's window, reading the
// limit back; RestorePersistingL2Limit puts the caller's limit back after
// the timing (the context may be shared with the caller, as in the C API).
//
// Cold L2: L2Flusher writes a buffer of twice the L2 size (at least 64 MiB)
// on the launch stream before each timed launch, outside the events that
// time the kernel: the kernel finds none of its data in L2.
#ifndef KERNCAP_REPRODUCER_REPLAY_CUDA_L2_CONTROL_H_
#define KERNCAP_REPRODUCER_REPLAY_CUDA_L2_CONTROL_H_

#include <cuda.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "reproducer/replay/cuda/cuda_driver.h"
#include "reproducer/replay/core/report.h"

namespace kerncap::replay {

// The context must be current. Never fails: what cannot be done is said in
// the state's note (supported = false when the driver has no such limit).
PersistingL2State ResetPersistingL2(const CudaDriver& cu, CUstream stream);
void RestorePersistingL2Limit(const CudaDriver& cu, const PersistingL2State& state);

class L2Flusher {
 public:
  // Allocates the buffer (bytes: twice `device`'s L2, at least 64 MiB).
  static absl::StatusOr<L2Flusher> Create(const CudaDriver& cu, CUdevice device);
  L2Flusher(L2Flusher&& other) noexcept;
  L2Flusher& operator=(L2Flusher&&) = delete;
  ~L2Flusher();

  // Enqueues the overwrite on `stream` (a different value each time, so no
  // cache of the previous contents helps).
  absl::Status Flush(CUstream stream);
  uint64_t bytes() const { return words_ * 4; }

 private:
  L2Flusher(const CudaDriver& cu, CUdeviceptr buffer, size_t words)
      : cu_(&cu), buffer_(buffer), words_(words) {}
  const CudaDriver* cu_;
  CUdeviceptr buffer_ = 0;
  size_t words_ = 0;
  unsigned flushes_ = 0;
};

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CUDA_L2_CONTROL_H_
