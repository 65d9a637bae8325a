// compare_options.h: which dtype and tolerance each region is compared with.
// Global --dtype applies to every region; --region-dtype=SEL:DTYPE overrides
// it for one region, where SEL is the region's application address (0x...),
// its index in the pre image (decimal), or a module variable's name.
// Tolerances (--atol/--rtol/--ulp) apply to regions that have a dtype; a
// region without one is compared bytewise and exactly.
// --compare-on says where the CUDA engine compares device regions (the
// verdict is the same either way: cuda/device_expectation.h).
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

// Where device regions are compared (CUDA; the HSA engine compares on the
// host and refuses kDevice):
//   kAuto    on the GPU when the device regions hold at least
//            kAutoDeviceCompareBytes and the comparison kernel is built in,
//            else on the host;
//   kDevice  on the GPU whatever the size (an error when this build has no
//            comparison kernel);
//   kHost    on the host (chunk by chunk: read, copy back, compare).
// With kAuto and kDevice a region whose device copy does not fit in free
// device memory is compared on the host (the report says which and why).
enum class ComparePlace { kAuto, kDevice, kHost };
inline constexpr uint64_t kAutoDeviceCompareBytes = 64ull << 20;
// "auto", "device", "host".
absl::StatusOr<ComparePlace> ParseComparePlace(absl::string_view name);
const char* ComparePlaceName(ComparePlace p);

struct CompareOptions {
  std::optional<DType> dtype;  // global
  std::vector<RegionDTypeRule> rules;
  Tolerance tolerance;
  ComparePlace place = ComparePlace::kAuto;

  // The dtype and tolerance for one region (exact bytes when no dtype).
  std::pair<DType, Tolerance> For(size_t index, uint64_t va, absl::string_view name) const;
};

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CORE_COMPARE_OPTIONS_H_
