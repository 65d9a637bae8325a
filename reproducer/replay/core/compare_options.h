// compare_options.h: which dtype and tolerance each region is compared with.
// Global --dtype applies to every region; --region-dtype=SEL:DTYPE overrides
// it for one region, where SEL is the region's application address (0x...),
// its index in the pre image (decimal), or a module variable's name.
// Tolerances (--atol/--rtol/--ulp) apply to regions that have a dtype; a
// region without one is compared bytewise and exactly.
#ifndef KERNCAP_REPRODUCER_REPLAY_CORE_COMPARE_OPTIONS_H_
#define KERNCAP_REPRODUCER_REPLAY_CORE_COMPARE_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "reproducer/replay/core/comparator.h"

namespace kerncap::replay {

struct RegionDTypeRule {
  std::optional<uint64_t> va;
  std::optional<size_t> index;
  std::string name;
  DType dtype = DType::kBytes;
  // Replaces the global tolerance for the matching region (the C API's
  // per-region tolerances, capi/); unset: the global one applies.
  std::optional<Tolerance> tolerance;
};

// Parses "0x7f12...:f32", "3:i32" or "d_offset:i32".
absl::StatusOr<RegionDTypeRule> ParseRegionDType(absl::string_view text);

struct CompareOptions {
  std::optional<DType> dtype;  // global
  std::vector<RegionDTypeRule> rules;
  Tolerance tolerance;

  // The dtype and tolerance for one region (exact bytes when no dtype).
  std::pair<DType, Tolerance> For(size_t index, uint64_t va, absl::string_view name) const;
};

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CORE_COMPARE_OPTIONS_H_
