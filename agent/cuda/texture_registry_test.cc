#include "agent/cuda/texture_registry.h"

#include "gtest/gtest.h"

namespace kerncap::agent::cuda {
namespace {

CUDA_RESOURCE_DESC LinearResource(CUdeviceptr ptr, size_t bytes) {
  CUDA_RESOURCE_DESC r = {};
  r.resType = CU_RESOURCE_TYPE_LINEAR;
  r.res.linear.devPtr = ptr;
  r.res.linear.format = CU_AD_FORMAT_FLOAT;
  r.res.linear.numChannels = 2;
  r.res.linear.sizeInBytes = bytes;
  return r;
}

TEST(TextureDescriptorTest, RecordsEveryFieldOfATextureObject) {
  CUDA_RESOURCE_DESC res = {};
  res.resType = CU_RESOURCE_TYPE_PITCH2D;
  res.res.pitch2D.devPtr = 0x7f0000010000;
  res.res.pitch2D.format = CU_AD_FORMAT_UNSIGNED_INT8;
  res.res.pitch2D.numChannels = 4;
  res.res.pitch2D.width = 100;
  res.res.pitch2D.height = 50;
  res.res.pitch2D.pitchInBytes = 512;
  CUDA_TEXTURE_DESC tex = {};
  tex.addressMode[0] = CU_TR_ADDRESS_MODE_BORDER;
  tex.addressMode[1] = CU_TR_ADDRESS_MODE_MIRROR;
  tex.addressMode[2] = CU_TR_ADDRESS_MODE_CLAMP;
  tex.filterMode = CU_TR_FILTER_MODE_LINEAR;
  tex.flags = CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_SRGB;
  tex.maxAnisotropy = 8;
  tex.mipmapFilterMode = CU_TR_FILTER_MODE_LINEAR;
  tex.mipmapLevelBias = 0.25f;
  tex.minMipmapLevelClamp = 1.0f;
  tex.maxMipmapLevelClamp = 3.5f;
  tex.borderColor[0] = 0.1f;
  tex.borderColor[3] = 0.9f;
  CUDA_RESOURCE_VIEW_DESC view = {};
  view.format = CU_RES_VIEW_FORMAT_UINT_4X8;
  view.width = 100;
  view.height = 50;
  view.depth = 1;
  view.firstMipmapLevel = 1;
  view.lastMipmapLevel = 2;
  view.firstLayer = 3;
  view.lastLayer = 4;

  TextureObjectDesc d = DescribeTextureObject(42, res, &tex, &view);
  EXPECT_EQ(d.type, TextureObjectDesc::Type::kTexture);
  EXPECT_EQ(d.handle, 42u);
  EXPECT_TRUE(d.argument_offsets.empty());
  EXPECT_EQ(d.resource.type, TextureResourceDesc::Type::kPitch2D);
  EXPECT_EQ(d.resource.device_ptr, 0x7f0000010000u);
  EXPECT_EQ(d.resource.format, static_cast<uint32_t>(CU_AD_FORMAT_UNSIGNED_INT8));
  EXPECT_EQ(d.resource.num_channels, 4u);
  EXPECT_EQ(d.resource.width, 100u);
  EXPECT_EQ(d.resource.height, 50u);
  EXPECT_EQ(d.resource.pitch_bytes, 512u);
  EXPECT_EQ(d.sampling.address_mode[0], static_cast<uint32_t>(CU_TR_ADDRESS_MODE_BORDER));
  EXPECT_EQ(d.sampling.address_mode[1], static_cast<uint32_t>(CU_TR_ADDRESS_MODE_MIRROR));
  EXPECT_EQ(d.sampling.address_mode[2], static_cast<uint32_t>(CU_TR_ADDRESS_MODE_CLAMP));
  EXPECT_EQ(d.sampling.filter_mode, static_cast<uint32_t>(CU_TR_FILTER_MODE_LINEAR));
  EXPECT_EQ(d.sampling.flags, static_cast<uint32_t>(CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_SRGB));
  EXPECT_EQ(d.sampling.max_anisotropy, 8u);
  EXPECT_EQ(d.sampling.mipmap_filter_mode, static_cast<uint32_t>(CU_TR_FILTER_MODE_LINEAR));
  EXPECT_EQ(d.sampling.mipmap_level_bias, 0.25f);
  EXPECT_EQ(d.sampling.min_mipmap_level_clamp, 1.0f);
  EXPECT_EQ(d.sampling.max_mipmap_level_clamp, 3.5f);
  EXPECT_EQ(d.sampling.border_color[0], 0.1f);
  EXPECT_EQ(d.sampling.border_color[3], 0.9f);
  ASSERT_TRUE(d.has_view);
  EXPECT_EQ(d.view.format, static_cast<uint32_t>(CU_RES_VIEW_FORMAT_UINT_4X8));
  EXPECT_EQ(d.view.width, 100u);
  EXPECT_EQ(d.view.depth, 1u);
  EXPECT_EQ(d.view.first_mipmap_level, 1u);
  EXPECT_EQ(d.view.last_mipmap_level, 2u);
  EXPECT_EQ(d.view.first_layer, 3u);
  EXPECT_EQ(d.view.last_layer, 4u);

  EXPECT_FALSE(DescribeTextureObject(1, res, &tex, nullptr).has_view);
}

TEST(TextureDescriptorTest, LinearArrayAndSurfaceResources) {
  TextureObjectDesc lin = DescribeTextureObject(1, LinearResource(0x1000, 256), nullptr, nullptr);
  EXPECT_EQ(lin.resource.type, TextureResourceDesc::Type::kLinear);
  EXPECT_EQ(lin.resource.device_ptr, 0x1000u);
  EXPECT_EQ(lin.resource.size_bytes, 256u);
  EXPECT_EQ(lin.resource.num_channels, 2u);

  CUDA_RESOURCE_DESC arr = {};
  arr.resType = CU_RESOURCE_TYPE_ARRAY;
  arr.res.array.hArray = reinterpret_cast<CUarray>(0xabc0);
  TextureObjectDesc s = DescribeSurfaceObject(7, arr);
  EXPECT_EQ(s.type, TextureObjectDesc::Type::kSurface);
  EXPECT_EQ(s.resource.type, TextureResourceDesc::Type::kArray);
  EXPECT_EQ(s.resource.array_handle, 0xabc0u);
  EXPECT_EQ(s.resource.device_ptr, 0u);

  CUDA_RESOURCE_DESC mip = {};
  mip.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
  mip.res.mipmap.hMipmappedArray = reinterpret_cast<CUmipmappedArray>(0xdef0);
  TextureObjectDesc m = DescribeTextureObject(8, mip, nullptr, nullptr);
  EXPECT_EQ(m.resource.type, TextureResourceDesc::Type::kMipmappedArray);
  EXPECT_EQ(m.resource.array_handle, 0xdef0u);
}

TEST(TextureRegistryTest, TracksObjectsPerContextAndType) {
  TextureRegistry reg;
  reg.Add(/*context=*/1, DescribeTextureObject(5, LinearResource(0x1000, 64), nullptr, nullptr));
  CUDA_RESOURCE_DESC arr = {};
  arr.resType = CU_RESOURCE_TYPE_ARRAY;
  reg.Add(1, DescribeSurfaceObject(5, arr));  // the same value, another object
  reg.Add(2, DescribeTextureObject(6, LinearResource(0x2000, 64), nullptr, nullptr));
  EXPECT_EQ(reg.size(), 3u);
  EXPECT_EQ(reg.CountInContext(1), 2u);
  EXPECT_EQ(reg.Find(1, 5).size(), 2u);
  EXPECT_TRUE(reg.Find(2, 5).empty());  // handles are per context
  EXPECT_TRUE(reg.Find(1, 6).empty());

  EXPECT_TRUE(reg.Remove(1, TextureObjectDesc::Type::kSurface, 5));
  ASSERT_EQ(reg.Find(1, 5).size(), 1u);
  EXPECT_EQ(reg.Find(1, 5)[0].type, TextureObjectDesc::Type::kTexture);
  EXPECT_FALSE(reg.Remove(1, TextureObjectDesc::Type::kSurface, 5));  // already gone
  // Destroyed while another context is current: the only such object goes.
  EXPECT_TRUE(reg.Remove(3, TextureObjectDesc::Type::kTexture, 6));
  EXPECT_EQ(reg.CountInContext(2), 0u);
  reg.Add(4, DescribeTextureObject(5, LinearResource(0x3000, 64), nullptr, nullptr));
  // Two contexts hold texture 5: a destroy from a third cannot tell which.
  EXPECT_FALSE(reg.Remove(3, TextureObjectDesc::Type::kTexture, 5));
  EXPECT_EQ(reg.size(), 2u);
  reg.EraseContext(1);
  EXPECT_EQ(reg.size(), 1u);
  EXPECT_EQ(reg.Find(4, 5).size(), 1u);
  reg.ResetAfterFork();
  EXPECT_EQ(reg.size(), 0u);
}

}  // namespace
}  // namespace kerncap::agent::cuda
