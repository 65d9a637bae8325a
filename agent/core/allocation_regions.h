// allocation_regions.h: which tracked allocations make up a capture's memory
// image for a device (the "address-space closure"), shared by every backend.
#ifndef KERNCAP_AGENT_CORE_ALLOCATION_REGIONS_H_
#define KERNCAP_AGENT_CORE_ALLOCATION_REGIONS_H_

#include <vector>

#include "agent/core/allocation_table.h"
#include "agent/core/capture_types.h"

namespace kerncap::agent {

// Maps an allocation table entry to the manifest's region kind.
RegionKind RegionKindFor(AllocationKind kind);

// Every live allocation the kernel on `device` can reach: the device's own,
// plus shared (host/managed) ones unless `host_regions` is false. VMM
// mappings not accessible from `device` are left out: the kernel cannot touch
// them either, and a copy would fail.
std::vector<RegionDesc> AllocationRegions(const AllocationTable& table, int device,
                                          bool host_regions);

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_CORE_ALLOCATION_REGIONS_H_
