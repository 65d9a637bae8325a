#include "agent/cuda/texture_params.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "common/texture_layout.h"

namespace kerncap::agent::cuda {
namespace {

const char* TypeName(TextureObjectDesc::Type type) {
  return type == TextureObjectDesc::Type::kTexture ? "texture" : "surface";
}

template <typename... Args>
std::string Format(const char* fmt, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

// Blob offsets of the 8-byte-aligned words to look at (see the header).
std::set<uint32_t> CandidateOffsets(std::string_view blob, const std::vector<ParamInfo>& params) {
  std::set<uint32_t> out;
  if (params.empty()) {
    for (uint64_t off = 0; off + 8 <= blob.size(); off += 8) out.insert(static_cast<uint32_t>(off));
    return out;
  }
  for (const ParamInfo& p : params) {
    if (p.size < 8) continue;
    const uint64_t end = static_cast<uint64_t>(p.offset) + p.size;
    for (uint64_t off = (static_cast<uint64_t>(p.offset) + 7) & ~uint64_t{7};
         off + 8 <= end && off + 8 <= blob.size(); off += 8) {
      out.insert(static_cast<uint32_t>(off));
    }
  }
  return out;
}

bool Usable(const TextureUse& use, TextureObjectDesc::Type type) {
  return type == TextureObjectDesc::Type::kTexture ? use.texture : use.surface;
}

// Why the object cannot be recreated at replay, or "".
std::string CheckResource(const TextureObjectDesc& o, uint32_t offset, const CoveredFn& covered) {
  const TextureResourceDesc& r = o.resource;
  switch (r.type) {
    case TextureResourceDesc::Type::kArray:
    case TextureResourceDesc::Type::kMipmappedArray:
      return Format(
          "the %s object 0x%" PRIx64 " at argument offset %u reads a CUDA %s (CUarray 0x%" PRIx64
          "); kerncap captures texture and surface objects over linear and pitch2D memory, not "
          "the contents of CUDA arrays",
          TypeName(o.type), o.handle, offset,
          r.type == TextureResourceDesc::Type::kArray ? "array" : "mipmapped array",
          r.array_handle);
    case TextureResourceDesc::Type::kLinear:
    case TextureResourceDesc::Type::kPitch2D:
      break;
  }
  const uint64_t extent = ResourceExtent(r);
  if (extent == 0) {
    return Format("the %s object 0x%" PRIx64 " at argument offset %u describes no memory",
                  TypeName(o.type), o.handle, offset);
  }
  if (r.device_ptr + extent < r.device_ptr || !covered(r.device_ptr, extent)) {
    return Format("the %s object 0x%" PRIx64 " at argument offset %u reads 0x%" PRIx64
                  "+%" PRIu64
                  ", which is not inside one live allocation the agent tracks (freed, a "
                  "module variable, or memory kerncap does not capture), so replay could not "
                  "recreate it",
                  TypeName(o.type), o.handle, offset, r.device_ptr, extent);
  }
  return "";
}

}  // namespace

uint64_t ResourceExtent(const TextureResourceDesc& r) {
  switch (r.type) {
    case TextureResourceDesc::Type::kLinear:
      return r.size_bytes;
    case TextureResourceDesc::Type::kPitch2D:
      return Pitch2DExtent(r.format, r.num_channels, r.width, r.height, r.pitch_bytes);
    default:
      return 0;
  }
}

TextureParamMatch MatchTextureParams(std::string_view blob, const std::vector<ParamInfo>& params,
                                     const TextureUse& use, const TextureRegistry& registry,
                                     uint64_t context, const CoveredFn& covered) {
  TextureParamMatch m;
  const size_t live = registry.CountInContext(context);
  if (live == 0) return m;  // nothing a word could name
  std::map<std::pair<int, uint64_t>, size_t> index;  // (type, handle) -> m.objects
  for (uint32_t off : CandidateOffsets(blob, params)) {
    uint64_t v;
    std::memcpy(&v, blob.data() + off, sizeof(v));
    if (v == 0) continue;
    std::vector<TextureObjectDesc> found = registry.Find(context, v);
    if (found.empty()) continue;
    if (!use.known) {
      m.refusal = Format(
          "argument word at offset %u equals the live %s object 0x%" PRIx64
          ", but the kernel's code could not be read to confirm that it uses %s objects",
          off, TypeName(found[0].type), v, TypeName(found[0].type));
      return m;
    }
    std::erase_if(found, [&](const TextureObjectDesc& o) { return !Usable(use, o.type); });
    if (found.empty()) continue;  // a value that happens to equal a handle
    if (found.size() > 1) {
      m.refusal = Format(
          "argument word at offset %u equals both a live texture and a live surface object "
          "(0x%" PRIx64 ") and the kernel uses both kinds: which one it passes is unknown",
          off, v);
      return m;
    }
    const TextureObjectDesc& o = found[0];
    const std::pair<int, uint64_t> key{static_cast<int>(o.type), o.handle};
    auto it = index.find(key);
    if (it != index.end()) {
      m.objects[it->second].argument_offsets.push_back(off);
      continue;
    }
    m.refusal = CheckResource(o, off, covered);
    if (!m.refusal.empty()) return m;
    index[key] = m.objects.size();
    m.objects.push_back(o);
    m.objects.back().argument_offsets = {off};
  }
  if (m.objects.empty() && use.known && (use.texture || use.surface)) {
    m.refusal = Format(
        "the kernel uses %s instructions but none of its arguments holds a live texture or "
        "surface object (%zu live in its context): handles passed through device memory are "
        "not supported, replay could not recreate them",
        use.texture && use.surface ? "texture and surface" : use.texture ? "texture" : "surface",
        live);
  }
  return m;
}

}  // namespace kerncap::agent::cuda
