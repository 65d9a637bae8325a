#include "agent/cuda/cuda_dispatch_source.h"

#include <cstring>

#include "agent/core/allocation_regions.h"
#include "agent/core/log.h"
#include "agent/cuda/driver_api.h"

namespace kerncap::agent::cuda {

void PinnedRanges::Add(const void* base, uint64_t size) {
  std::lock_guard lock(mu_);
  ranges_.emplace_back(reinterpret_cast<uintptr_t>(base), size);
}

void PinnedRanges::Remove(const void* base) {
  std::lock_guard lock(mu_);
  std::erase_if(ranges_, [&](const auto& r) { return r.first == reinterpret_cast<uintptr_t>(base); });
}

bool PinnedRanges::Contains(const void* p, uint64_t size) const {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard lock(mu_);
  for (const auto& [base, len] : ranges_) {
    if (a >= base && a - base <= len && size <= len - (a - base)) return true;
  }
  return false;
}

CudaDispatchSource::~CudaDispatchSource() {
  snapshot_.reset();
  for (void* p : pinned_) Driver().cuMemHostUnregister(p);
}

DeviceSnapshotOps* CudaDispatchSource::snapshot_ops() {
  if (target_.enter_agent_thread == nullptr) return nullptr;
  if (snapshot_ == nullptr) {
    CUcontext ctx = nullptr;
    if (Driver().cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr) return nullptr;
    snapshot_ = std::make_unique<CudaSnapshotOps>(ctx, target_.enter_agent_thread);
  }
  return snapshot_.get();
}

Status CudaDispatchSource::Quiesce() {
  CUresult r = Driver().cuCtxSynchronize();
  if (r != CUDA_SUCCESS) return Error("cuCtxSynchronize: " + CuErrorString(r));
  return OkStatus();
}

Result<std::vector<RegionDesc>> CudaDispatchSource::Regions() {
  std::vector<RegionDesc> out =
      AllocationRegions(*allocations_, target_.device, target_.host_regions);
  // Module-scope variables of the kernel's module.
  if (target_.module != nullptr && target_.module_record && target_.module_record->info) {
    for (const cubin::CubinVariable& v : target_.module_record->info->variables) {
      CUdeviceptr dptr = 0;
      size_t bytes = 0;
      CUresult r = Driver().cuModuleGetGlobal(&dptr, &bytes, target_.module, v.name.c_str());
      if (r != CUDA_SUCCESS) {
        KC_ALOG(kWarn, "module variable %s not resolvable (%s); not captured", v.name.c_str(),
                CuErrorString(r).c_str());
        continue;
      }
      out.push_back(RegionDesc{dptr, bytes,
                               v.constant ? RegionKind::kConstant : RegionKind::kModuleGlobal,
                               target_.device, v.name});
    }
  }
  return out;
}

Result<std::vector<CodeObjectRef>> CudaDispatchSource::CodeObjects() {
  std::vector<CodeObjectRef> out;
  if (target_.module_record) {
    out.push_back(target_.module_record->code);
  } else {
    KC_ALOG(kWarn, "the kernel's code image was not seen at module load; capture has no code object");
  }
  return out;
}

Status CudaDispatchSource::ReadRegion(const RegionDesc& region, uint64_t offset, void* dst,
                                      size_t size) {
  if (region.kind == RegionKind::kHostPinned) {
    // Under UVA the device address of pinned host memory is its host address.
    std::memcpy(dst, reinterpret_cast<const void*>(region.va + offset), size);
    return OkStatus();
  }
  CUresult r = Driver().cuMemcpyDtoH(dst, static_cast<CUdeviceptr>(region.va + offset), size);
  if (r != CUDA_SUCCESS) return Error("cuMemcpyDtoH: " + CuErrorString(r));
  return OkStatus();
}

Status CudaDispatchSource::WaitForDispatch() {
  CUresult r = Driver().cuStreamSynchronize(target_.stream);
  if (r != CUDA_SUCCESS) return Error("cuStreamSynchronize: " + CuErrorString(r));
  return OkStatus();
}

void CudaDispatchSource::OnSlot(void* data, size_t capacity) {
  // The ring is normally registered once per connection (CudaAgent's
  // on_ring_mapped); only a ring that could not be registered then is pinned
  // slot by slot here, for the duration of the capture.
  if (target_.pinned != nullptr && target_.pinned->Contains(data, capacity)) return;
  if (pinned_.count(data) || unpinnable_.count(data)) return;
  CUresult r = Driver().cuMemHostRegister(data, capacity, 0);
  if (r == CUDA_SUCCESS) {
    pinned_.insert(data);
  } else {
    unpinnable_.insert(data);
    KC_ALOG(kInfo, "ring slot not pinned (%s); copying through pageable memory",
            CuErrorString(r).c_str());
  }
}

}  // namespace kerncap::agent::cuda
