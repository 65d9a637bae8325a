// reservation_planner.h: where the replay maps captured device memory.
//
// The driver honours a cuMemAddressReserve address hint reliably only for
// large reservations (>= 1 GiB; measured on an H200 with driver 580), and several captured allocations can share one VMM granule
// (cudaMalloc sub-allocates small buffers inside 2 MiB pages). So the plan is
// two-level:
//   mapping      granule-aligned range covering one or more captured regions
//                whose rounded ranges overlap or touch; one cuMemCreate+cuMemMap
//   reservation  cluster of mappings less than `cluster_gap` apart, reserved in
//                one call at its (granule-aligned) base, padded to
//                `min_reservation` bytes.
// Pure computation: no driver calls, unit tested on CPU.
#ifndef KERNCAP_REPRODUCER_REPLAY_CORE_RESERVATION_PLANNER_H_
#define KERNCAP_REPRODUCER_REPLAY_CORE_RESERVATION_PLANNER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace kerncap::replay {

struct PlanInput {
  uint64_t va = 0;
  uint64_t size = 0;
  size_t region_index = 0;  // caller's handle (index into the manifest's pre regions)
};

struct Mapping {
  uint64_t va = 0;    // granule aligned
  uint64_t size = 0;  // granule multiple
  std::vector<size_t> region_indices;
};

struct Reservation {
  uint64_t va = 0;    // requested base (granule aligned)
  uint64_t size = 0;  // >= min_reservation, granule multiple
  std::vector<Mapping> mappings;
};

struct PlanOptions {
  uint64_t granularity = 2ull << 20;
  uint64_t min_reservation = 1ull << 30;
  uint64_t cluster_gap = 1ull << 30;
};

// Plans reservations for `regions` (any order; zero-size regions are ignored).
// InvalidArgument when the granularity is not a power of two or a range wraps
// the address space.
absl::StatusOr<std::vector<Reservation>> PlanReservations(std::vector<PlanInput> regions,
                                                          const PlanOptions& options);

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CORE_RESERVATION_PLANNER_H_
