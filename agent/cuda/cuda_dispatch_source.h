// cuda_dispatch_source.h: DispatchSource for one CUDA launch (see
// agent/core/capture_orchestrator.h): quiesce with cuCtxSynchronize, copy
// device memory with cuMemcpyDtoH straight into ring slots (pinned with
// cuMemHostRegister for the duration of the capture, so the copies run at
// PCIe speed; unpinned copies are the fallback), wait with cuStreamSynchronize.
//
// All calls run on the application thread that is launching, inside the
// CUPTI callback, with the application's context current.
#ifndef KERNCAP_AGENT_CUDA_CUDA_DISPATCH_SOURCE_H_
#define KERNCAP_AGENT_CUDA_CUDA_DISPATCH_SOURCE_H_

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "agent/core/allocation_table.h"
#include "agent/core/capture_orchestrator.h"
#include "agent/cuda/cuda_snapshot.h"
#include "agent/cuda/module_registry.h"

namespace kerncap::agent::cuda {

// Host ranges the agent registered once per connection (its ring): slots in
// them need no per-capture cuMemHostRegister. Thread-safe.
class PinnedRanges {
 public:
  void Add(const void* base, uint64_t size);
  void Remove(const void* base);
  bool Contains(const void* p, uint64_t size) const;

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<uintptr_t, uint64_t>> ranges_;
};

struct DispatchTarget {
  int device = 0;
  CUstream stream = nullptr;        // already resolved (per-thread default stream)
  CUmodule module = nullptr;        // the kernel's module in this context, if known
  std::shared_ptr<ModuleRecord> module_record;  // its image, if known
  bool host_regions = true;
  const PinnedRanges* pinned = nullptr;  // ranges already registered (the ring)
  // Marks the calling thread's driver calls as the agent's own (a snapshot's
  // drain thread); null: no device snapshots for this capture.
  void (*enter_agent_thread)() = nullptr;
};

class CudaDispatchSource : public DispatchSource {
 public:
  CudaDispatchSource(const AllocationTable* allocations, DispatchTarget target)
      : allocations_(allocations), target_(std::move(target)) {}
  ~CudaDispatchSource() override;

  Status Quiesce() override;
  Result<std::vector<RegionDesc>> Regions() override;
  Result<std::vector<CodeObjectRef>> CodeObjects() override;
  Status ReadRegion(const RegionDesc& region, uint64_t offset, void* dst, size_t size) override;
  Status WaitForDispatch() override;
  void OnSlot(void* data, size_t capacity) override;
  DeviceSnapshotOps* snapshot_ops() override;

 private:
  std::unique_ptr<CudaSnapshotOps> snapshot_;
  const AllocationTable* allocations_;
  DispatchTarget target_;
  std::set<void*> pinned_;      // slots registered by this capture
  std::set<void*> unpinnable_;  // slots whose registration failed (not retried)
};

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_CUDA_DISPATCH_SOURCE_H_
