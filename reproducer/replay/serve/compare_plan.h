// compare_plan.h: the host-side, GPU-free half of the device comparison
// (compare_abi.h): cutting regions into tiles, filling the per-region
// parameters from compare options, and turning the kernel's raw stats back
// into comparator.h's CompareStats. Unit tested on the CPU.
#ifndef KERNCAP_REPRODUCER_REPLAY_SERVE_COMPARE_PLAN_H_
#define KERNCAP_REPRODUCER_REPLAY_SERVE_COMPARE_PLAN_H_

#include <cstdint>
#include <vector>

#include "reproducer/replay/core/comparator.h"
#include "reproducer/replay/serve/compare_abi.h"

namespace kerncap::replay::serve {

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

}  // namespace kerncap::replay::serve

#endif  // KERNCAP_REPRODUCER_REPLAY_SERVE_COMPARE_PLAN_H_
