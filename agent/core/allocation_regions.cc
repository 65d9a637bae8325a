#include "agent/core/allocation_regions.h"

#include "agent/core/log.h"

namespace kerncap::agent {

RegionKind RegionKindFor(AllocationKind kind) {
  switch (kind) {
    case AllocationKind::kDevice:
    case AllocationKind::kDeviceAsync: return RegionKind::kDevice;
    case AllocationKind::kVmmMapping: return RegionKind::kDeviceVmm;
    case AllocationKind::kManaged: return RegionKind::kManaged;
    case AllocationKind::kHostPinned:
    case AllocationKind::kHostRegistered: return RegionKind::kHostPinned;
  }
  return RegionKind::kDevice;
}

std::vector<RegionDesc> AllocationRegions(const AllocationTable& table, int device,
                                          bool host_regions) {
  std::vector<RegionDesc> out;
  const uint64_t my_bit = device >= 0 && device < 64 ? (1ull << device) : 0;
  for (const Allocation& a : table.ListForDevice(device, /*include_shared=*/true)) {
    if (IsHostKind(a.kind) && !host_regions) continue;
    if (a.kind == AllocationKind::kVmmMapping && (a.access_mask & my_bit) == 0) {
      KC_ALOG(kDebug, "skipping VMM mapping 0x%llx+%llu: no access from device %d",
              static_cast<unsigned long long>(a.va), static_cast<unsigned long long>(a.size),
              device);
      continue;
    }
    out.push_back(RegionDesc{a.va, a.size, RegionKindFor(a.kind),
                             a.device == kAnyDevice ? device : a.device, ""});
  }
  return out;
}

}  // namespace kerncap::agent
