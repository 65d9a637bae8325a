// cuda_snapshot.h: DeviceSnapshotOps for CUDA (agent/core/device_snapshot.h).
//
//   memory        cuMemGetInfo, cuMemAlloc / cuMemFree (plain allocations:
//                 the stream-ordered pool would keep freed snapshot memory
//                 reserved, away from the application)
//   copies        cuMemcpyAsync on a stream of the agent's own created
//                 CU_STREAM_NON_BLOCKING, so the drain never waits for, nor
//                 is waited on by, the application's legacy default stream
//   compare       kc_chunk_diff, a PTX kernel the agent carries (kChunkDiffPtx
//                 in cuda_snapshot.cc), loaded once per context with
//                 cuModuleLoadData: one thread per 8-byte word sets the flag
//                 of its chunk when the two words differ. Exact (no hashing,
//                 so no collisions); ranges not 8-byte aligned are reported
//                 changed (conservative: they cross PCIe)
//   fingerprints  kc_chunk_fingerprint, another PTX kernel
//                 (kChunkFingerprintPtx): the chunk fingerprint of
//                 common/agent_link/chunk_fingerprint.h at HBM speed, checked
//                 against the CPU reference on a known buffer before the
//                 first use of each capture
//   drain thread  cuCtxSetCurrent(the capture's context) and the agent's
//                 "own calls" mark (DispatchTarget::enter_agent_thread), so
//                 its driver calls are neither tracked nor gated
//
// The kernel's module is loaded through the driver like any module, so it
// shows in CUPTI's module callbacks (the kernel census lists kc_chunk_diff
// once a capture took this path).
#ifndef KERNCAP_AGENT_CUDA_CUDA_SNAPSHOT_H_
#define KERNCAP_AGENT_CUDA_CUDA_SNAPSHOT_H_

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "agent/core/device_snapshot.h"

namespace kerncap::agent::cuda {

class CudaSnapshotOps : public DeviceSnapshotOps {
 public:
  // ctx: the capture's context (current on the capturing thread).
  CudaSnapshotOps(CUcontext ctx, void (*enter_agent_thread)())
      : ctx_(ctx), enter_agent_thread_(enter_agent_thread) {}
  ~CudaSnapshotOps() override;

  Status FreeMemory(uint64_t* free_bytes, uint64_t* total_bytes) override;
  Result<uint64_t> Allocate(uint64_t bytes) override;
  void Free(uint64_t buffer) override;
  Status Copy(uint64_t dst, uint64_t src, uint64_t bytes) override;
  Status DiffChunks(uint64_t a, uint64_t b, uint64_t bytes, uint64_t chunk,
                    std::vector<uint8_t>* differ) override;
  Status Fingerprint(uint64_t src, uint64_t bytes, uint64_t chunk,
                     std::vector<link::ChunkFingerprint>* fps) override;
  Status Sync() override;
  Status ReadToHost(uint64_t src, void* dst, size_t bytes) override;
  Status BindDrainThread() override;

 private:
  Status Stream();
  // Fingerprints a known buffer on the device against the reference.
  Status SelfCheck();
  Status FingerprintOnDevice(uint64_t src, uint64_t bytes, uint64_t chunk,
                             std::vector<link::ChunkFingerprint>* fps);
  CUcontext ctx_;
  void (*enter_agent_thread_)();
  CUstream stream_ = nullptr;
  CUdeviceptr flags_ = 0;  // per-chunk flags of DiffChunks, grown as needed
  uint64_t flags_bytes_ = 0;
  CUdeviceptr sums_ = 0;  // per-chunk lane sums of Fingerprint, grown as needed
  uint64_t sums_bytes_ = 0;
  bool self_checked_ = false;
  Status self_check_;
};

// The compare and fingerprint kernels' PTX (exposed for the GPU test).
extern const char kChunkDiffPtx[];
extern const char kChunkFingerprintPtx[];

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_CUDA_SNAPSHOT_H_
