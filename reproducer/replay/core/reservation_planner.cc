#include "reproducer/replay/core/reservation_planner.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace kerncap::replay {

absl::StatusOr<std::vector<Reservation>> PlanReservations(std::vector<PlanInput> regions,
                                                          const PlanOptions& options) {
  const uint64_t g = options.granularity;
  if (g == 0 || (g & (g - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat("granularity %u is not a power of two", g));
  }
  regions.erase(std::remove_if(regions.begin(), regions.end(),
                               [](const PlanInput& r) { return r.size == 0; }),
                regions.end());
  std::sort(regions.begin(), regions.end(),
            [](const PlanInput& a, const PlanInput& b) { return a.va < b.va; });

  // Level 1: granule-rounded ranges merged into mappings.
  std::vector<Mapping> mappings;
  for (const PlanInput& r : regions) {
    if (r.va + r.size < r.va || r.va + r.size > UINT64_MAX - g) {
      return absl::InvalidArgumentError(
          absl::StrFormat("region 0x%x+%u wraps the address space", r.va, r.size));
    }
    const uint64_t begin = r.va & ~(g - 1);
    const uint64_t end = (r.va + r.size + g - 1) & ~(g - 1);
    if (!mappings.empty() && begin <= mappings.back().va + mappings.back().size) {
      Mapping& m = mappings.back();
      m.size = std::max(m.va + m.size, end) - m.va;
      m.region_indices.push_back(r.region_index);
    } else {
      mappings.push_back(Mapping{begin, end - begin, {r.region_index}});
    }
  }

  // Level 2: mappings less than cluster_gap apart share a reservation.
  std::vector<Reservation> out;
  for (Mapping& m : mappings) {
    if (!out.empty()) {
      Reservation& last = out.back();
      const Mapping& prev = last.mappings.back();
      if (m.va - (prev.va + prev.size) < options.cluster_gap) {
        last.mappings.push_back(std::move(m));
        continue;
      }
    }
    Reservation res;
    res.va = m.va;
    res.mappings.push_back(std::move(m));
    out.push_back(std::move(res));
  }
  const uint64_t min_res = (options.min_reservation + g - 1) & ~(g - 1);
  for (size_t i = 0; i < out.size(); ++i) {
    Reservation& res = out[i];
    const Mapping& last = res.mappings.back();
    uint64_t size = std::max(last.va + last.size - res.va, min_res);
    // Padding must never reach the next reservation (it cannot when
    // cluster_gap >= min_reservation, but options are the caller's).
    if (i + 1 < out.size()) size = std::min(size, std::max(out[i + 1].va - res.va,
                                                            last.va + last.size - res.va));
    // Nor wrap the address space.
    if (res.va + size < res.va) size = last.va + last.size - res.va;
    res.size = size;
  }
  return out;
}

}  // namespace kerncap::replay
