// texture_params.h: which words of a launch's argument blob hold live
// texture or surface objects, decided at capture (armed launches only).
//
// A handle is a small 64-bit value, so a word that merely equals a live
// handle is not one: a word counts as a handle only when the kernel's code
// can use that kind of object (TextureUse from the cubin). The words looked
// at are every 8-byte-aligned blob word inside a parameter of 8 bytes or more
// (a handle parameter, or a handle member of a by-value struct); with an
// unknown layout, every aligned word of the blob. What cannot be told apart:
// in a kernel that reads textures, a by-value word (a u64, or struct members
// sharing a word) whose value equals a live handle counts as that handle.
//
// Refusals (a wrong answer is worse than none): the capture is not taken,
// and the reason says why, when
//   - a word equals a live object whose use the kernel's code cannot confirm
//     (code not readable) or that could be either a texture or a surface;
//   - an object's resource is a CUDA array or mipmapped array (their
//     contents are not captured);
//   - an object's memory is not inside one live tracked allocation (freed,
//     or memory kerncap does not capture): replay could not recreate it;
//   - the kernel uses texture or surface instructions, live objects exist in
//     its context, yet no argument word holds one (handles passed through
//     memory: replay cannot find and recreate them).
#ifndef KERNCAP_AGENT_CUDA_TEXTURE_PARAMS_H_
#define KERNCAP_AGENT_CUDA_TEXTURE_PARAMS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/core/capture_types.h"
#include "common/cuda/cubin_elf.h"
#include "agent/cuda/param_blob.h"
#include "agent/cuda/texture_registry.h"

namespace kerncap::agent::cuda {

using ::kerncap::cubin::TextureUse;  // what a kernel's code can use (common/cuda)

struct TextureParamMatch {
  // The objects found, each with the blob offsets holding it.
  std::vector<TextureObjectDesc> objects;
  // Non-empty: the dispatch must not be captured, for this reason.
  std::string refusal;
};

// True when [va, va+size) lies inside one live tracked allocation.
using CoveredFn = std::function<bool(uint64_t va, uint64_t size)>;

// `params` empty: the layout is unknown (every aligned word is looked at).
TextureParamMatch MatchTextureParams(std::string_view blob, const std::vector<ParamInfo>& params,
                                     const TextureUse& use, const TextureRegistry& registry,
                                     uint64_t context, const CoveredFn& covered);

// Bytes a linear or pitch2D resource reads from device_ptr on: size_bytes,
// or Pitch2DExtent (common/texture_layout.h). 0 for array resources.
uint64_t ResourceExtent(const TextureResourceDesc& resource);

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_TEXTURE_PARAMS_H_
