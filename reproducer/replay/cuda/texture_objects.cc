#include "reproducer/replay/cuda/texture_objects.h"

#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/texture_layout.h"

namespace kerncap::replay {
namespace {

bool IsSurface(const v1::TextureObject& t) { return t.type() == v1::TextureObject::SURFACE_OBJECT; }

std::string Describe(const v1::TextureObject& t) {
  return absl::StrFormat("%s object 0x%x (argument offset %s)",
                         IsSurface(t) ? "surface" : "texture", t.handle(),
                         t.argument_offsets_size() > 0 ? absl::StrCat(t.argument_offsets(0)) : "?");
}

CUDA_RESOURCE_DESC ResourceDesc(const v1::TextureResource& r, uint64_t replay_ptr) {
  CUDA_RESOURCE_DESC d = {};
  d.flags = r.flags();
  if (r.type() == v1::TextureResource::RESOURCE_LINEAR) {
    d.resType = CU_RESOURCE_TYPE_LINEAR;
    d.res.linear.devPtr = replay_ptr;
    d.res.linear.format = static_cast<CUarray_format>(r.format());
    d.res.linear.numChannels = r.num_channels();
    d.res.linear.sizeInBytes = r.size_bytes();
  } else {
    d.resType = CU_RESOURCE_TYPE_PITCH2D;
    d.res.pitch2D.devPtr = replay_ptr;
    d.res.pitch2D.format = static_cast<CUarray_format>(r.format());
    d.res.pitch2D.numChannels = r.num_channels();
    d.res.pitch2D.width = r.width();
    d.res.pitch2D.height = r.height();
    d.res.pitch2D.pitchInBytes = r.pitch_bytes();
  }
  return d;
}

CUDA_TEXTURE_DESC TextureDesc(const v1::TextureSampling& s) {
  CUDA_TEXTURE_DESC d = {};
  for (int i = 0; i < s.address_mode_size() && i < 3; ++i) {
    d.addressMode[i] = static_cast<CUaddress_mode>(s.address_mode(i));
  }
  d.filterMode = static_cast<CUfilter_mode>(s.filter_mode());
  d.flags = s.flags();
  d.maxAnisotropy = s.max_anisotropy();
  d.mipmapFilterMode = static_cast<CUfilter_mode>(s.mipmap_filter_mode());
  d.mipmapLevelBias = s.mipmap_level_bias();
  d.minMipmapLevelClamp = s.min_mipmap_level_clamp();
  d.maxMipmapLevelClamp = s.max_mipmap_level_clamp();
  for (int i = 0; i < s.border_color_size() && i < 4; ++i) d.borderColor[i] = s.border_color(i);
  return d;
}

CUDA_RESOURCE_VIEW_DESC ViewDesc(const v1::TextureView& v) {
  CUDA_RESOURCE_VIEW_DESC d = {};
  d.format = static_cast<CUresourceViewFormat>(v.format());
  d.width = v.width();
  d.height = v.height();
  d.depth = v.depth();
  d.firstMipmapLevel = v.first_mipmap_level();
  d.lastMipmapLevel = v.last_mipmap_level();
  d.firstLayer = v.first_layer();
  d.lastLayer = v.last_layer();
  return d;
}

}  // namespace

uint64_t TextureResourceExtent(const v1::TextureResource& r) {
  switch (r.type()) {
    case v1::TextureResource::RESOURCE_LINEAR:
      return r.size_bytes();
    case v1::TextureResource::RESOURCE_PITCH2D:
      return Pitch2DExtent(r.format(), r.num_channels(), r.width(), r.height(), r.pitch_bytes());
    default:
      return 0;
  }
}

absl::Status TextureObjects::Check(const v1::CaptureManifest& m) {
  if (m.texture_objects_size() > kMaxObjects) {
    return absl::InvalidArgumentError(absl::StrCat("the capture names ", m.texture_objects_size(),
                                                   " texture/surface objects (at most ",
                                                   kMaxObjects, ")"));
  }
  const std::string& blob = m.argument_blob();
  std::set<uint32_t> used;
  for (const v1::TextureObject& t : m.texture_objects()) {
    const std::string what = Describe(t);
    if (t.type() != v1::TextureObject::TEXTURE_OBJECT &&
        t.type() != v1::TextureObject::SURFACE_OBJECT) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": unknown object type ",
                                                     static_cast<int>(t.type())));
    }
    const v1::TextureResource& r = t.resource();
    switch (r.type()) {
      case v1::TextureResource::RESOURCE_LINEAR:
      case v1::TextureResource::RESOURCE_PITCH2D:
        break;
      case v1::TextureResource::RESOURCE_ARRAY:
      case v1::TextureResource::RESOURCE_MIPMAPPED_ARRAY:
        return absl::FailedPreconditionError(absl::StrCat(
            what, " reads a CUDA ",
            r.type() == v1::TextureResource::RESOURCE_ARRAY ? "array" : "mipmapped array",
            ", whose contents are not in the capture: kerncap cannot replay it"));
      default:
        return absl::InvalidArgumentError(absl::StrCat(what, ": unknown resource type ",
                                                       static_cast<int>(r.type())));
    }
    if (TextureResourceExtent(r) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, " describes no memory"));
    }
    if (t.argument_offsets_size() == 0 || t.argument_offsets_size() > kMaxObjects) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", t.argument_offsets_size(),
                                                     " argument offsets (1..", kMaxObjects,
                                                     " expected)"));
    }
    for (uint32_t off : t.argument_offsets()) {
      if (off % 8 != 0 || static_cast<uint64_t>(off) + 8 > blob.size()) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": argument offset ", off,
                                                       " is not an aligned word of the ",
                                                       blob.size(), "-byte argument blob"));
      }
      uint64_t v;
      std::memcpy(&v, blob.data() + off, sizeof(v));
      if (v != t.handle()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: the argument word at offset %u holds 0x%x, not the handle", what, off, v));
      }
      if (!used.insert(off).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": argument offset ", off, " is named by two objects"));
      }
    }
    if (t.sampling().address_mode_size() > 3 || t.sampling().border_color_size() > 4) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": more than 3 address modes or 4 border colour values"));
    }
  }
  return absl::OkStatus();
}

absl::Status TextureObjects::Create(const v1::CaptureManifest& m, const PlaceFn& place,
                                    std::string* args) {
  Destroy();
  KC_RETURN_IF_ERROR(Check(m));
  absl::Status st;
  for (const v1::TextureObject& t : m.texture_objects()) {
    const std::string what = Describe(t);
    const v1::TextureResource& r = t.resource();
    const uint64_t bytes = TextureResourceExtent(r);
    absl::StatusOr<uint64_t> replay_ptr = place(r.device_ptr(), bytes);
    if (!replay_ptr.ok()) {
      st = absl::FailedPreconditionError(
          absl::StrCat("recreating the ", what, ": ", replay_ptr.status().message()));
      break;
    }
    const CUDA_RESOURCE_DESC res = ResourceDesc(r, *replay_ptr);
    uint64_t handle = 0;
    CUresult cr;
    const char* call;
    if (IsSurface(t)) {
      call = "cuSurfObjectCreate";
      CUsurfObject h = 0;
      cr = cu_.cuSurfObjectCreate(&h, &res);
      handle = static_cast<uint64_t>(h);
    } else {
      call = "cuTexObjectCreate";
      const CUDA_TEXTURE_DESC tex = TextureDesc(t.sampling());
      const CUDA_RESOURCE_VIEW_DESC view = t.has_view() ? ViewDesc(t.view()) : CUDA_RESOURCE_VIEW_DESC{};
      CUtexObject h = 0;
      cr = cu_.cuTexObjectCreate(&h, &res, &tex, t.has_view() ? &view : nullptr);
      handle = static_cast<uint64_t>(h);
    }
    if (cr != CUDA_SUCCESS) {
      st = absl::FailedPreconditionError(absl::StrCat(
          "recreating the ", what, " from its recorded descriptor failed: ", call, ": ",
          cu_.ErrorText(cr)));
      break;
    }
    ReplayedTextureObject o;
    o.surface = IsSurface(t);
    o.captured_handle = t.handle();
    o.replay_handle = handle;
    o.resource = r.type() == v1::TextureResource::RESOURCE_LINEAR ? "linear" : "pitch2d";
    o.captured_ptr = r.device_ptr();
    o.replay_ptr = *replay_ptr;
    o.bytes = bytes;
    o.argument_offsets.assign(t.argument_offsets().begin(), t.argument_offsets().end());
    objects_.push_back(std::move(o));
    for (uint32_t off : t.argument_offsets()) {
      if (static_cast<uint64_t>(off) + 8 > args->size()) {
        st = absl::InvalidArgumentError(absl::StrCat(
            what, ": argument offset ", off, " lies past the kernel's parameters"));
        break;
      }
      std::memcpy(args->data() + off, &handle, sizeof(handle));
    }
    if (!st.ok()) break;
  }
  if (!st.ok()) Destroy();
  return st;
}

void TextureObjects::Destroy() {
  for (const ReplayedTextureObject& o : objects_) {
    if (o.surface) {
      cu_.cuSurfObjectDestroy(static_cast<CUsurfObject>(o.replay_handle));
    } else {
      cu_.cuTexObjectDestroy(static_cast<CUtexObject>(o.replay_handle));
    }
  }
  objects_.clear();
}

}  // namespace kerncap::replay
