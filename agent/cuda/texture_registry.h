// texture_registry.h: the process's live texture and surface objects
// (cuTexObjectCreate / cuSurfObjectCreate and their Destroy, which the
// runtime's cudaCreateTextureObject / cudaCreateSurfaceObject reach), per
// context, with the descriptors they were created from. A capture asks which
// argument words hold one of them (texture_params.h).
//
// Fed by always-on driver callbacks: object creation is not on the launch
// path, so tracking it costs launches nothing.
//
// A handle is a 64-bit value the driver hands out per context; a texture and
// a surface object may have the same value, so objects are keyed by
// (context, type, handle).
#ifndef KERNCAP_AGENT_CUDA_TEXTURE_REGISTRY_H_
#define KERNCAP_AGENT_CUDA_TEXTURE_REGISTRY_H_

#include <cuda.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "agent/core/capture_types.h"

namespace kerncap::agent::cuda {

// The descriptors as the application passed them (no driver call). `tex` and
// `view` may be null (view: none given). argument_offsets stays empty.
TextureObjectDesc DescribeTextureObject(uint64_t handle, const CUDA_RESOURCE_DESC& res,
                                        const CUDA_TEXTURE_DESC* tex,
                                        const CUDA_RESOURCE_VIEW_DESC* view);
TextureObjectDesc DescribeSurfaceObject(uint64_t handle, const CUDA_RESOURCE_DESC& res);

class TextureRegistry {
 public:
  // Records a created object (replacing one with the same key).
  void Add(uint64_t context, TextureObjectDesc desc);
  // Forgets a destroyed object. The destroy call may come from another
  // context than the creation: then the only object of that type and handle
  // is removed. Returns whether one was.
  bool Remove(uint64_t context, TextureObjectDesc::Type type, uint64_t handle);
  void EraseContext(uint64_t context);

  // Live objects of `context` whose handle is `value` (at most a texture and
  // a surface object).
  std::vector<TextureObjectDesc> Find(uint64_t context, uint64_t value) const;
  size_t CountInContext(uint64_t context) const;
  size_t size() const;

  // Fork child: the parent's objects are not the child's.
  void ResetAfterFork();

 private:
  using Key = std::tuple<uint64_t, int, uint64_t>;  // context, type, handle
  mutable std::mutex mu_;
  std::map<Key, TextureObjectDesc> objects_;
};

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_TEXTURE_REGISTRY_H_
