// launch_override.h: launch-configuration overrides for tuning in the
// reproducer (kerncap-replay --grid/--block/..., the resident mode's
// "launch" object): what replaces the captured grid, block, dynamic shared
// memory, max-dynamic-shared-memory attribute, cache preference and cluster
// dimensions, checked against the limits every CUDA device has before any
// launch (device- and kernel-specific limits are checked by the engine).
//
// Validating an overridden launch against the captured outputs says only
// whether the output is unchanged. A kernel whose output depends on its
// launch shape (one output element per thread, a fixed tile per block)
// legitimately produces another result under another shape, so a failure is
// only the candidate's when the captured code object at the same shape
// passes: the engine runs that probe and reports "launch_shape_dependent"
// when the captured code object fails at the overridden shape while it
// passes at the captured one (ValidationReport::launch_shape_dependent).
//
// Text forms (flags): a dim3 is "X", "X,Y", "X,Y,Z" or "XxYxZ" (missing
// dimensions are 1); a cache preference is none | shared | l1 | equal.
// JSON form (serve protocol, reports):
//   {"grid": [x,y,z], "block": [x,y,z], "shared_mem_bytes": n,
//    "max_dynamic_shared_mem": n, "cache_preference": "l1", "cluster": [x,y,z]}
// every key optional; unknown keys are refused.
#ifndef KERNCAP_REPRODUCER_REPLAY_CORE_LAUNCH_OVERRIDE_H_
#define KERNCAP_REPRODUCER_REPLAY_CORE_LAUNCH_OVERRIDE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerncap/v1/manifest.pb.h"
#include "nlohmann/json.hpp"

namespace kerncap::replay {

using Dim3 = std::array<uint32_t, 3>;

// The launch an engine performs.
struct LaunchShape {
  Dim3 grid{1, 1, 1};     // blocks per dimension
  Dim3 block{1, 1, 1};    // threads per block
  Dim3 cluster{1, 1, 1};  // blocks per cluster (1,1,1: no cluster)
  uint32_t shared_mem_bytes = 0;  // dynamic shared memory
  bool cooperative = false;
  bool has_cluster() const { return cluster[0] * cluster[1] * cluster[2] > 1; }
};

// The function's L1/shared split preference (cuFuncSetCacheConfig).
enum class CachePreference { kNone, kShared, kL1, kEqual };
const char* CachePreferenceName(CachePreference p);
absl::StatusOr<CachePreference> ParseCachePreference(absl::string_view s);

struct LaunchOverride {
  std::optional<Dim3> grid, block, cluster;
  std::optional<uint32_t> shared_mem_bytes;
  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (raised to the launch's
  // dynamic shared memory when smaller, as for the captured launch).
  std::optional<uint32_t> max_dynamic_shared_mem;
  std::optional<CachePreference> cache_preference;

  bool empty() const {
    return !grid && !block && !cluster && !shared_mem_bytes && !max_dynamic_shared_mem &&
           !cache_preference;
  }
  // True when grid, block, cluster or dynamic shared memory change: what the
  // output of a kernel can depend on (attributes and hints cannot change it).
  bool changes_shape() const { return grid || block || cluster || shared_mem_bytes; }
};

// "256", "256,1", "16x16x1" -> {256,1,1}, {256,1,1}, {16,16,1}.
absl::StatusOr<Dim3> ParseDim3(absl::string_view s);
std::string FormatDim3(const Dim3& d);  // "16,16,1"

// The captured launch (absent or zero dimensions are 1).
LaunchShape CapturedLaunch(const v1::LaunchConfig& launch);

// `captured` with `o` applied, or InvalidArgument naming what is out of
// range (checked only when `o` changes the shape; the captured launch alone
// is what the application ran and is not second-guessed): a zero dimension, grid y/z > 65535 or x > 2^31-1, more than 1024
// threads per block, block z > 64, a cluster that does not divide the grid
// or has more than 16 blocks, a cluster on a cooperative launch, dynamic
// shared memory above max_dynamic_shared_mem.
absl::StatusOr<LaunchShape> ApplyLaunchOverride(const LaunchShape& captured,
                                                const LaunchOverride& o);

// "grid=(64,1,1) block=(256,1,1) smem=0 [cluster=(2,1,1)]"
std::string DescribeLaunch(const LaunchShape& s);

nlohmann::json LaunchOverrideJson(const LaunchOverride& o);
absl::StatusOr<LaunchOverride> LaunchOverrideFromJson(const nlohmann::json& j);

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CORE_LAUNCH_OVERRIDE_H_
