// texture_layout.h: how many bytes of memory a CUDA texture or surface
// resource over linear / pitched memory covers. Shared by the agent (which
// checks at capture that the memory is captured) and replay (which checks it
// before recreating the object). Header-only and std-only: the agent links
// nothing of common/ but headers.
//
// Formats are CUarray_format values (cuda.h), spelled out here so that the
// header needs no CUDA toolkit.
#ifndef KERNCAP_COMMON_TEXTURE_LAYOUT_H_
#define KERNCAP_COMMON_TEXTURE_LAYOUT_H_

#include <cstdint>

namespace kerncap {

// Bytes of one element of `format` with `channels` channels; 0 for formats
// without a plain per-element size (block compressed, planar YUV, unknown)
// and for channel counts other than 1, 2, 4.
inline uint64_t TexelBytes(uint32_t format, uint32_t channels) {
  uint64_t component = 0;
  switch (format) {
    case 0x01:  // CU_AD_FORMAT_UNSIGNED_INT8
    case 0x08:  // CU_AD_FORMAT_SIGNED_INT8
      component = 1;
      break;
    case 0x02:  // CU_AD_FORMAT_UNSIGNED_INT16
    case 0x09:  // CU_AD_FORMAT_SIGNED_INT16
    case 0x10:  // CU_AD_FORMAT_HALF
      component = 2;
      break;
    case 0x03:  // CU_AD_FORMAT_UNSIGNED_INT32
    case 0x0a:  // CU_AD_FORMAT_SIGNED_INT32
    case 0x20:  // CU_AD_FORMAT_FLOAT
      component = 4;
      break;
    // Formats that name their channels: the element size is fixed.
    case 0xc0:  // CU_AD_FORMAT_UNORM_INT8X1
    case 0xc6:  // CU_AD_FORMAT_SNORM_INT8X1
      return 1;
    case 0xc1:  // CU_AD_FORMAT_UNORM_INT8X2
    case 0xc7:  // CU_AD_FORMAT_SNORM_INT8X2
    case 0xc3:  // CU_AD_FORMAT_UNORM_INT16X1
    case 0xc9:  // CU_AD_FORMAT_SNORM_INT16X1
      return 2;
    case 0xc2:  // CU_AD_FORMAT_UNORM_INT8X4
    case 0xc8:  // CU_AD_FORMAT_SNORM_INT8X4
    case 0xc4:  // CU_AD_FORMAT_UNORM_INT16X2
    case 0xca:  // CU_AD_FORMAT_SNORM_INT16X2
    case 0x50:  // CU_AD_FORMAT_UNORM_INT_101010_2
      return 4;
    case 0xc5:  // CU_AD_FORMAT_UNORM_INT16X4
    case 0xcb:  // CU_AD_FORMAT_SNORM_INT16X4
      return 8;
    default:
      return 0;
  }
  if (channels != 1 && channels != 2 && channels != 4) return 0;
  return component * channels;
}

// Bytes a pitch2D resource reads from its base address: up to the last
// texel of the last row, pitch*(height-1) + width*texel (whole rows,
// pitch*height, when the texel size is unknown). 0 for an empty resource
// and for dimensions beyond 2^32 (no real resource has them; refusing them
// keeps the products from overflowing).
inline uint64_t Pitch2DExtent(uint32_t format, uint32_t channels, uint64_t width,
                              uint64_t height, uint64_t pitch_bytes) {
  constexpr uint64_t kMax = uint64_t{1} << 32;
  if (width == 0 || height == 0 || pitch_bytes == 0) return 0;
  if (width > kMax || height > kMax || pitch_bytes > kMax) return 0;
  const uint64_t texel = TexelBytes(format, channels);
  if (texel == 0) return pitch_bytes * height;
  return pitch_bytes * (height - 1) + width * texel;
}

}  // namespace kerncap

#endif  // KERNCAP_COMMON_TEXTURE_LAYOUT_H_
