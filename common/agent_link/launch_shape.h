// launch_shape.h: the shape key of a dispatch, for per-shape arms
// (selector.h, kerncap.v1.PerShape). The agent computes it where it sees the
// launch (CUDA launch callback, graph kernel node, HSA dispatch packet) and
// sends it in CaptureBegin.launch_shape; kerncapd only compares keys, it never
// recomputes one (it has no allocation table to tell pointers from scalars).
//
// The key is a 64-bit hash (FNV-1a over the fields below, finished with
// MurmurHash3's fmix64) of:
//   kLaunch   grid[3], block[3], dynamic shared memory bytes, cluster[3];
//   kScalars  the same, then the argument blob's length and its bytes, where
//             every 8-byte-aligned word that `points_into_allocation` says is
//             an address of a tracked allocation counts as "a pointer" (a
//             fixed marker) instead of its value: buffers move between
//             dispatches, sizes, strides, flags and scalars do not.
// Two dispatches of different shapes get the same key with probability about
// 2^-64 per pair; the worst a collision does is skip a shape.
//
// Std-only: compiled into the agent.
#ifndef KERNCAP_COMMON_AGENT_LINK_LAUNCH_SHAPE_H_
#define KERNCAP_COMMON_AGENT_LINK_LAUNCH_SHAPE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/agent_link/vocabulary.h"

namespace kerncap::link {

// What the key is made of (see above).
struct LaunchShapeInputs {
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t shared_mem_bytes = 0;
  std::array<uint32_t, 3> cluster{0, 0, 0};
  std::string_view argument_blob;  // kScalars only
};

// The key of `in` for `mode` (kScalars or kLaunch; kOff gives 0).
// `points_into_allocation` may be empty (no word is taken for a pointer).
uint64_t LaunchShapeKey(PerShape mode, const LaunchShapeInputs& in,
                        const std::function<bool(uint64_t)>& points_into_allocation);

// A dispatch's key for a per-shape arm's mode, computed only when such an
// arm's name pattern matches the dispatch (on the launching thread); nullopt
// when the agent cannot compute it (the dispatch is then not taken).
using LaunchShapeFn = std::function<std::optional<uint64_t>(PerShape)>;

// The key as it travels (CaptureBegin.launch_shape, the manifest's
// launch_shape): 16 lowercase hex digits.
inline constexpr size_t kLaunchShapeKeyChars = 16;
std::string LaunchShapeKeyText(uint64_t key);
bool IsLaunchShapeKey(std::string_view text);

}  // namespace kerncap::link

#endif  // KERNCAP_COMMON_AGENT_LINK_LAUNCH_SHAPE_H_
