// compare_plan.h: the host-side, GPU-free half of the device comparison
// (compare_abi.h): cutting regions into tiles, filling the per-region
// parameters from compare options, turning the kernel's raw stats back into
// comparator.h's CompareStats, and validate's device path plan (compare
// units, the memory margin; cuda/device_expectation.h). Unit tested on the
// CPU.
#ifndef KERNCAP_REPRODUCER_REPLAY_CORE_COMPARE_PLAN_H_
#define KERNCAP_REPRODUCER_REPLAY_CORE_COMPARE_PLAN_H_

#include <cstdint>
#include <vector>

#include "reproducer/replay/core/comparator.h"
#include "reproducer/replay/core/compare_abi.h"

namespace kerncap::replay {

// 256 KiB: 4096 blocks for 1 GiB, enough to fill any GPU several times over,
// and few enough that the tile table (24 bytes each) stays small.
inline constexpr uint64_t kDefaultTileBytes = 256u << 10;

// Tiles covering regions of the given sizes, in order; empty regions get
// none. `tile_bytes` must be a positive multiple of 16.
std::vector<KcCompareTile> PlanTiles(const std::vector<uint64_t>& region_sizes,
                                     uint64_t tile_bytes = kDefaultTileBytes);

// The kernel's parameters for one region compared with dtype/tolerance.
KcCompareRegion MakeCompareRegion(uint64_t actual, uint64_t expected, uint64_t size, DType dtype,
                                  const Tolerance& tolerance);

// The kernel's counters as comparator.h's stats (bytes/elements compared
// are not counted by the kernel and stay 0; no samples). passed() of a
// region is failing == 0.
CompareStats ToCompareStats(const KcCompareStats& raw);

// validate's device path compares a region's chunks in units: runs of whole
// consecutive chunks of at most max(unit_bytes, the chunk) bytes. The kernel
// says per unit whether it is bitwise equal to its expectation; the chunks
// of a unit that is not are compared again on the host. 1 MiB: a 24 GiB
// capture is 24576 units (1.5 MiB of parameters, 2 MiB of counters), and a
// differing unit costs at most 1 MiB of host comparison.
inline constexpr uint64_t kDefaultUnitBytes = 1u << 20;
struct CompareUnit {
  uint64_t offset = 0;       // bytes into the region
  uint64_t length = 0;
  uint64_t first_chunk = 0;  // chunk index of its first chunk
  uint64_t chunks = 0;
};
// Units covering chunks of the given lengths, in order (zero-length chunks
// join the unit they fall in).
std::vector<CompareUnit> PlanCompareUnits(const std::vector<uint32_t>& chunk_lengths,
                                          uint64_t unit_bytes = kDefaultUnitBytes);

// Device memory validate's device path leaves free beside its copies (the
// launch's local memory, modules, the driver): max(1 GiB, 5% of the device).
uint64_t DeviceCompareMargin(uint64_t total_bytes);

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CORE_COMPARE_PLAN_H_
