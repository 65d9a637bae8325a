#include "daemon/agent_link/wire_convert.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kerncap::link {
namespace {

using ::testing::HasSubstr;

std::string BlobWithWords(std::initializer_list<uint64_t> words) {
  std::string blob;
  for (uint64_t w : words) blob.append(reinterpret_cast<const char*>(&w), sizeof(w));
  return blob;
}

TextureObjectInfo PitchTexture(uint64_t handle, uint32_t offset) {
  TextureObjectInfo t;
  t.type = TextureObjectType::kTexture;
  t.handle = handle;
  t.argument_offsets = {offset};
  t.resource.type = TextureResourceType::kPitch2D;
  t.resource.device_ptr = 0x7f0000001000;
  t.resource.format = 0x20;  // CU_AD_FORMAT_FLOAT
  t.resource.num_channels = 1;
  t.resource.width = 64;
  t.resource.height = 32;
  t.resource.pitch_bytes = 512;
  t.sampling.address_mode = {1, 1, 0};
  t.sampling.filter_mode = 1;
  t.sampling.flags = 2;  // CU_TRSF_NORMALIZED_COORDINATES
  t.sampling.mipmap_level_bias_bits = std::bit_cast<uint32_t>(0.5f);
  t.sampling.border_color_bits = {std::bit_cast<uint32_t>(1.0f), std::bit_cast<uint32_t>(-2.0f),
                                  std::bit_cast<uint32_t>(std::numeric_limits<float>::quiet_NaN()),
                                  0};
  return t;
}

TEST(CheckTextureObjectsTest, AcceptsHandlesThatTheBlobHolds) {
  CaptureBeginMsg b;
  b.texture_objects.push_back(PitchTexture(3, 8));
  EXPECT_TRUE(CheckTextureObjects(b, BlobWithWords({0x7f0000002000, 3, 64})).ok());
  EXPECT_TRUE(CheckTextureObjects(CaptureBeginMsg{}, "").ok());
}

TEST(CheckTextureObjectsTest, RejectsWhatAnAgentMustNotSend) {
  const std::string blob = BlobWithWords({0x7f0000002000, 3, 64});
  auto check = [&](TextureObjectInfo t) {
    CaptureBeginMsg b;
    b.texture_objects.push_back(std::move(t));
    return CheckTextureObjects(b, blob);
  };
  TextureObjectInfo t = PitchTexture(3, 8);
  t.argument_offsets = {24};  // past the blob
  EXPECT_THAT(check(t).message(), HasSubstr("not an aligned word"));
  t.argument_offsets = {4};  // unaligned
  EXPECT_THAT(check(t).message(), HasSubstr("not an aligned word"));
  t.argument_offsets = {16};  // holds 64, not the handle
  EXPECT_THAT(check(t).message(), HasSubstr("holds 0x40, not the handle"));
  t.argument_offsets = {};
  EXPECT_THAT(check(t).message(), HasSubstr("0 argument offsets"));
  // Unknown types and resource types never get here: the frame fails to decode.
  {
    CaptureBeginMsg with_texture;
    with_texture.texture_objects.push_back(PitchTexture(3, 8));
    auto decode_with = [&](const std::string& from, const std::string& to) {
      Frame f;
      f.type = MessageType::kCaptureBegin;
      f.json = EncodeBody(with_texture);
      size_t at = f.json.find(from);
      EXPECT_NE(at, std::string::npos) << f.json;
      if (at != std::string::npos) f.json.replace(at, from.size(), to);
      CaptureBeginMsg out;
      return DecodeBody(f, &out);
    };
    EXPECT_THAT(decode_with(R"("type":"texture")", R"("type":"sampler")").message(),
                HasSubstr("texture object type 'sampler' is not one of: texture, surface"));
    EXPECT_THAT(decode_with(R"("type":"pitch2d")", R"("type":"tiled")").message(),
                HasSubstr("texture resource type 'tiled'"));
    EXPECT_TRUE(decode_with(R"("type":"pitch2d")", R"("type":"pitch2d")").ok());
  }
  t = PitchTexture(3, 8);
  t.sampling.border_color_bits.resize(9);
  EXPECT_THAT(check(t).message(), HasSubstr("border"));

  CaptureBeginMsg many;
  for (size_t i = 0; i <= kMaxTextureObjects; ++i) many.texture_objects.push_back(PitchTexture(3, 8));
  EXPECT_THAT(CheckTextureObjects(many, blob).message(), HasSubstr("at most 64"));
}

TEST(FillManifestTest, CopiesTextureObjectsWithExactDescriptors) {
  HelloMsg hello;
  CaptureBeginMsg b;
  b.texture_objects.push_back(PitchTexture(3, 8));
  TextureObjectInfo surf;
  surf.type = TextureObjectType::kSurface;
  surf.handle = 3;  // the same value as the texture: another object
  surf.argument_offsets = {16};
  surf.resource.type = TextureResourceType::kArray;
  surf.resource.array_handle = 0x55aa00;
  surf.has_view = true;
  surf.view.format = 0x0a;
  surf.view.width = 7;
  surf.view.last_layer = 2;
  b.texture_objects.push_back(surf);
  // Through the wire's JSON, as the daemon receives it.
  Frame frame;
  frame.type = MessageType::kCaptureBegin;
  frame.json = EncodeBody(b);
  CaptureBeginMsg got;
  ASSERT_TRUE(DecodeBody(frame, &got).ok());

  v1::CaptureManifest m;
  FillManifest(hello, got, BlobWithWords({0, 3, 3}), &m);
  ASSERT_EQ(m.texture_objects_size(), 2);
  const v1::TextureObject& t = m.texture_objects(0);
  EXPECT_EQ(t.type(), v1::TextureObject::TEXTURE_OBJECT);
  EXPECT_EQ(t.handle(), 3u);
  ASSERT_EQ(t.argument_offsets_size(), 1);
  EXPECT_EQ(t.argument_offsets(0), 8u);
  EXPECT_EQ(t.resource().type(), v1::TextureResource::RESOURCE_PITCH2D);
  EXPECT_EQ(t.resource().device_ptr(), 0x7f0000001000u);
  EXPECT_EQ(t.resource().format(), 0x20u);
  EXPECT_EQ(t.resource().width(), 64u);
  EXPECT_EQ(t.resource().height(), 32u);
  EXPECT_EQ(t.resource().pitch_bytes(), 512u);
  ASSERT_EQ(t.sampling().address_mode_size(), 3);
  EXPECT_EQ(t.sampling().address_mode(0), 1u);
  EXPECT_EQ(t.sampling().filter_mode(), 1u);
  EXPECT_EQ(t.sampling().flags(), 2u);
  EXPECT_EQ(t.sampling().mipmap_level_bias(), 0.5f);
  ASSERT_EQ(t.sampling().border_color_size(), 4);
  EXPECT_EQ(t.sampling().border_color(1), -2.0f);
  EXPECT_TRUE(std::isnan(t.sampling().border_color(2)));  // NaN survives the JSON
  EXPECT_FALSE(t.has_view());

  const v1::TextureObject& s = m.texture_objects(1);
  EXPECT_EQ(s.type(), v1::TextureObject::SURFACE_OBJECT);
  EXPECT_EQ(s.resource().type(), v1::TextureResource::RESOURCE_ARRAY);
  EXPECT_EQ(s.resource().array_handle(), 0x55aa00u);
  EXPECT_FALSE(s.has_sampling());  // surfaces have no sampling state
  ASSERT_TRUE(s.has_view());
  EXPECT_EQ(s.view().format(), 0x0au);
  EXPECT_EQ(s.view().width(), 7u);
  EXPECT_EQ(s.view().last_layer(), 2u);
}

}  // namespace
}  // namespace kerncap::link
