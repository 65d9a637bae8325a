#include "agent/cuda/texture_registry.h"

#include <iterator>
#include <new>

namespace kerncap::agent::cuda {
namespace {

TextureResourceDesc DescribeResource(const CUDA_RESOURCE_DESC& res) {
  TextureResourceDesc r;
  r.flags = res.flags;
  switch (res.resType) {
    case CU_RESOURCE_TYPE_ARRAY:
      r.type = TextureResourceDesc::Type::kArray;
      r.array_handle = reinterpret_cast<uint64_t>(res.res.array.hArray);
      break;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
      r.type = TextureResourceDesc::Type::kMipmappedArray;
      r.array_handle = reinterpret_cast<uint64_t>(res.res.mipmap.hMipmappedArray);
      break;
    case CU_RESOURCE_TYPE_LINEAR:
      r.type = TextureResourceDesc::Type::kLinear;
      r.device_ptr = res.res.linear.devPtr;
      r.format = static_cast<uint32_t>(res.res.linear.format);
      r.num_channels = res.res.linear.numChannels;
      r.size_bytes = res.res.linear.sizeInBytes;
      break;
    case CU_RESOURCE_TYPE_PITCH2D:
      r.type = TextureResourceDesc::Type::kPitch2D;
      r.device_ptr = res.res.pitch2D.devPtr;
      r.format = static_cast<uint32_t>(res.res.pitch2D.format);
      r.num_channels = res.res.pitch2D.numChannels;
      r.width = res.res.pitch2D.width;
      r.height = res.res.pitch2D.height;
      r.pitch_bytes = res.res.pitch2D.pitchInBytes;
      break;
  }
  return r;
}

}  // namespace

TextureObjectDesc DescribeTextureObject(uint64_t handle, const CUDA_RESOURCE_DESC& res,
                                        const CUDA_TEXTURE_DESC* tex,
                                        const CUDA_RESOURCE_VIEW_DESC* view) {
  TextureObjectDesc d;
  d.type = TextureObjectDesc::Type::kTexture;
  d.handle = handle;
  d.resource = DescribeResource(res);
  if (tex != nullptr) {
    TextureSamplingDesc& s = d.sampling;
    for (int i = 0; i < 3; ++i) s.address_mode[i] = static_cast<uint32_t>(tex->addressMode[i]);
    s.filter_mode = static_cast<uint32_t>(tex->filterMode);
    s.flags = tex->flags;
    s.max_anisotropy = tex->maxAnisotropy;
    s.mipmap_filter_mode = static_cast<uint32_t>(tex->mipmapFilterMode);
    s.mipmap_level_bias = tex->mipmapLevelBias;
    s.min_mipmap_level_clamp = tex->minMipmapLevelClamp;
    s.max_mipmap_level_clamp = tex->maxMipmapLevelClamp;
    for (int i = 0; i < 4; ++i) s.border_color[i] = tex->borderColor[i];
  }
  if (view != nullptr) {
    d.has_view = true;
    d.view.format = static_cast<uint32_t>(view->format);
    d.view.width = view->width;
    d.view.height = view->height;
    d.view.depth = view->depth;
    d.view.first_mipmap_level = view->firstMipmapLevel;
    d.view.last_mipmap_level = view->lastMipmapLevel;
    d.view.first_layer = view->firstLayer;
    d.view.last_layer = view->lastLayer;
  }
  return d;
}

TextureObjectDesc DescribeSurfaceObject(uint64_t handle, const CUDA_RESOURCE_DESC& res) {
  TextureObjectDesc d;
  d.type = TextureObjectDesc::Type::kSurface;
  d.handle = handle;
  d.resource = DescribeResource(res);
  return d;
}

void TextureRegistry::Add(uint64_t context, TextureObjectDesc desc) {
  std::lock_guard lock(mu_);
  Key key{context, static_cast<int>(desc.type), desc.handle};
  objects_[key] = std::move(desc);
}

bool TextureRegistry::Remove(uint64_t context, TextureObjectDesc::Type type, uint64_t handle) {
  std::lock_guard lock(mu_);
  if (objects_.erase(Key{context, static_cast<int>(type), handle}) > 0) return true;
  auto only = objects_.end();
  for (auto it = objects_.begin(); it != objects_.end(); ++it) {
    if (std::get<1>(it->first) != static_cast<int>(type) || std::get<2>(it->first) != handle) {
      continue;
    }
    if (only != objects_.end()) return false;  // several contexts: cannot tell which
    only = it;
  }
  if (only == objects_.end()) return false;
  objects_.erase(only);
  return true;
}

void TextureRegistry::EraseContext(uint64_t context) {
  std::lock_guard lock(mu_);
  for (auto it = objects_.begin(); it != objects_.end();) {
    it = std::get<0>(it->first) == context ? objects_.erase(it) : std::next(it);
  }
}

std::vector<TextureObjectDesc> TextureRegistry::Find(uint64_t context, uint64_t value) const {
  std::lock_guard lock(mu_);
  std::vector<TextureObjectDesc> out;
  for (int type : {static_cast<int>(TextureObjectDesc::Type::kTexture),
                   static_cast<int>(TextureObjectDesc::Type::kSurface)}) {
    auto it = objects_.find(Key{context, type, value});
    if (it != objects_.end()) out.push_back(it->second);
  }
  return out;
}

size_t TextureRegistry::CountInContext(uint64_t context) const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [key, desc] : objects_) n += std::get<0>(key) == context ? 1 : 0;
  return n;
}

size_t TextureRegistry::size() const {
  std::lock_guard lock(mu_);
  return objects_.size();
}

void TextureRegistry::ResetAfterFork() {
  new (&mu_) std::mutex();
  objects_.clear();
}

}  // namespace kerncap::agent::cuda
