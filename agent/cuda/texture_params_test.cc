#include "agent/cuda/texture_params.h"

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kerncap::agent::cuda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr uint64_t kCtx = 0xc0;
constexpr uint64_t kBuf = 0x7f0000100000;  // a tracked allocation of 1 MiB

TextureObjectDesc Linear(TextureObjectDesc::Type type, uint64_t handle, uint64_t ptr,
                         uint64_t bytes) {
  TextureObjectDesc d;
  d.type = type;
  d.handle = handle;
  d.resource.type = TextureResourceDesc::Type::kLinear;
  d.resource.device_ptr = ptr;
  d.resource.format = CU_AD_FORMAT_FLOAT;
  d.resource.num_channels = 1;
  d.resource.size_bytes = bytes;
  return d;
}

std::string Blob(size_t size) { return std::string(size, '\0'); }
void Put(std::string* blob, size_t off, uint64_t v) { std::memcpy(blob->data() + off, &v, 8); }

bool InBuffer(uint64_t va, uint64_t size) {
  return va >= kBuf && size <= (1u << 20) && va - kBuf <= (1u << 20) - size;
}

constexpr TextureUse kTextures{true, true, false};
constexpr TextureUse kSurfaces{true, false, true};
constexpr TextureUse kNeither{true, false, false};
constexpr TextureUse kUnknown{};

class TextureParamsTest : public ::testing::Test {
 protected:
  TextureParamMatch Match(const std::string& blob, const std::vector<ParamInfo>& params,
                          const TextureUse& use) {
    return MatchTextureParams(blob, params, use, reg_, kCtx, InBuffer);
  }
  TextureRegistry reg_;
  // tex(cudaTextureObject_t t, float* out, int n): offsets 0, 8, 16.
  std::vector<ParamInfo> params_ = {{0, 8}, {8, 8}, {16, 4}};
};

TEST_F(TextureParamsTest, FindsTheHandleParameterWithItsDescriptor) {
  reg_.Add(kCtx, Linear(TextureObjectDesc::Type::kTexture, 5, kBuf, 4096));
  std::string blob = Blob(20);
  Put(&blob, 0, 5);
  Put(&blob, 8, kBuf + 64);
  TextureParamMatch m = Match(blob, params_, kTextures);
  ASSERT_THAT(m.refusal, IsEmpty());
  ASSERT_EQ(m.objects.size(), 1u);
  EXPECT_EQ(m.objects[0].handle, 5u);
  EXPECT_THAT(m.objects[0].argument_offsets, ElementsAre(0u));
  EXPECT_EQ(m.objects[0].resource.device_ptr, kBuf);
  EXPECT_EQ(m.objects[0].resource.size_bytes, 4096u);
}

TEST_F(TextureParamsTest, OneObjectPassedTwiceAndInsideAStruct) {
  reg_.Add(kCtx, Linear(TextureObjectDesc::Type::kTexture, 5, kBuf, 4096));
  reg_.Add(kCtx, Linear(TextureObjectDesc::Type::kTexture, 9, kBuf + 8192, 4096));
  // k(tex a, struct {int n; tex t; tex u;} s): the struct at 8, 24 bytes.
  std::vector<ParamInfo> params = {{0, 8}, {8, 24}};
  std::string blob = Blob(32);
  Put(&blob, 0, 5);
  Put(&blob, 8, 3);  // n = 3 and padding
  Put(&blob, 16, 5);
  Put(&blob, 24, 9);
  TextureParamMatch m = Match(blob, params, kTextures);
  ASSERT_THAT(m.refusal, IsEmpty());
  ASSERT_EQ(m.objects.size(), 2u);
  EXPECT_THAT(m.objects[0].argument_offsets, ElementsAre(0u, 16u));
  EXPECT_EQ(m.objects[1].handle, 9u);
  EXPECT_THAT(m.objects[1].argument_offsets, ElementsAre(24u));
}

TEST_F(TextureParamsTest, OnlyAlignedWordsInsideParametersOfEightBytesOrMore) {
  reg_.Add(kCtx, Linear(TextureObjectDesc::Type::kTexture, 5, kBuf, 4096));
  // k(int a, int b, struct{int x,y,z;} s at 8, tex t at 24): the struct's
  // only aligned word (8..16) is looked at; a and b (4 bytes) are not.
  std::vector<ParamInfo> params = {{0, 4}, {4, 4}, {8, 12}, {24, 8}};
  std::string blob = Blob(32);
  Put(&blob, 0, 5);  // a = 5, b = 0: not a parameter of 8 bytes
  Put(&blob, 24, 5);
  TextureParamMatch m = Match(blob, params, kTextures);
  ASSERT_THAT(m.refusal, IsEmpty());
  ASSERT_EQ(m.objects.size(), 1u);
  EXPECT_THAT(m.objects[0].argument_offsets, ElementsAre(24u));
}

TEST_F(TextureParamsTest, UnknownLayoutLooksAtEveryAlignedWord) {
  reg_.Add(kCtx, Linear(TextureObjectDesc::Type::kTexture, 5, kBuf, 4096));
  std::string blob = Blob(24);
  Put(&blob, 16, 5);
  TextureParamMatch m = Match(blob, {}, kTextures);
  ASSERT_THAT(m.refusal, IsEmpty());
  ASSERT_EQ(m.objects.size(), 1u);
  EXPECT_THAT(m.objects[0].argument_offsets, ElementsAre(16u));
}

TEST_F(TextureParamsTest, AValueThatEqualsAHandleInAKernelWithoutTexturesIsAValue) {
  reg_.Add(kCtx, Linear(TextureObjectDesc::Type::kTexture, 5, kBuf, 4096));
  std::string blob = Blob(20);
  Put(&blob, 0, 5);
  TextureParamMatch m = Match(blob, params_, kNeither);
  EXPECT_THAT(m.refusal, IsEmpty());
  EXPECT_THAT(m.objects, IsEmpty());
  // A surface kernel does not read texture objects either; but it uses
  // surfaces while none is passed: refused.
  m = Match(blob, params_, kSurfaces);
  EXPECT_THAT(m.objects, IsEmpty());
  EXPECT_THAT(m.refusal, HasSubstr("uses surface instructions but none of its arguments"));
}

TEST_F(TextureParamsTest, NoLiveObjectsNothingToDoWhateverTheCode) {
  std::string blob = Blob(20);
  Put(&blob, 0, 5);
  for (const TextureUse& use : {kTextures, kSurfaces, kNeither, kUnknown}) {
    TextureParamMatch m = Match(blob, params_, use);
    EXPECT_THAT(m.refusal, IsEmpty());
    EXPECT_THAT(m.objects, IsEmpty());
  }
  // Objects of another context do not count either.
  reg_.Add(kCtx + 1, Linear(TextureObjectDesc::Type::kTexture, 5, kBuf, 4096));
  TextureParamMatch m = Match(blob, params_, kTextures);
  EXPECT_THAT(m.refusal, IsEmpty());
  EXPECT_THAT(m.objects, IsEmpty());
}

TEST_F(TextureParamsTest, RefusesHandlesPassedThroughMemory) {
  reg_.Add(kCtx, Linear(TextureObjectDesc::Type::kTexture, 5, kBuf, 4096));
  // k(const cudaTextureObject_t* handles, float* out): pointers only.
  std::string blob = Blob(16);
  Put(&blob, 0, kBuf);
  Put(&blob, 8, kBuf + 4096);
  TextureParamMatch m = Match(blob, {{0, 8}, {8, 8}}, kTextures);
  EXPECT_THAT(m.objects, IsEmpty());
  EXPECT_THAT(m.refusal, HasSubstr("uses texture instructions but none of its arguments holds a "
                                   "live texture or surface object (1 live in its context)"));
  EXPECT_THAT(m.refusal, HasSubstr("passed through device memory are not supported"));
}

TEST_F(TextureParamsTest, RefusesWhenTheCodeCannotConfirmAHandle) {
  reg_.Add(kCtx, Linear(TextureObjectDesc::Type::kTexture, 5, kBuf, 4096));
  std::string blob = Blob(20);
  Put(&blob, 0, 5);
  TextureParamMatch m = Match(blob, params_, kUnknown);
  EXPECT_THAT(m.objects, IsEmpty());
  EXPECT_THAT(m.refusal, HasSubstr("offset 0 equals the live texture object 0x5"));
  EXPECT_THAT(m.refusal, HasSubstr("could not be read"));
  // Unknown code but no word equal to a handle: nothing to refuse.
  Put(&blob, 0, 6);
  EXPECT_THAT(Match(blob, params_, kUnknown).refusal, IsEmpty());
}

TEST_F(TextureParamsTest, RefusesATextureAndASurfaceWithTheSameValue) {
  reg_.Add(kCtx, Linear(TextureObjectDesc::Type::kTexture, 5, kBuf, 4096));
  reg_.Add(kCtx, Linear(TextureObjectDesc::Type::kSurface, 5, kBuf, 4096));
  std::string blob = Blob(20);
  Put(&blob, 0, 5);
  TextureParamMatch m = Match(blob, params_, TextureUse{true, true, true});
  EXPECT_THAT(m.refusal, HasSubstr("both a live texture and a live surface object"));
  // A kernel that uses only textures reads the texture.
  m = Match(blob, params_, kTextures);
  ASSERT_THAT(m.refusal, IsEmpty());
  ASSERT_EQ(m.objects.size(), 1u);
  EXPECT_EQ(m.objects[0].type, TextureObjectDesc::Type::kTexture);
}

TEST_F(TextureParamsTest, RefusesCudaArrays) {
  TextureObjectDesc arr;
  arr.type = TextureObjectDesc::Type::kSurface;
  arr.handle = 3;
  arr.resource.type = TextureResourceDesc::Type::kArray;
  arr.resource.array_handle = 0x55aa00;
  reg_.Add(kCtx, arr);
  std::string blob = Blob(20);
  Put(&blob, 0, 3);
  TextureParamMatch m = Match(blob, params_, kSurfaces);
  EXPECT_THAT(m.objects, IsEmpty());
  EXPECT_THAT(m.refusal, HasSubstr("the surface object 0x3 at argument offset 0 reads a CUDA "
                                   "array (CUarray 0x55aa00)"));
  arr.type = TextureObjectDesc::Type::kTexture;
  arr.resource.type = TextureResourceDesc::Type::kMipmappedArray;
  reg_.Add(kCtx, arr);
  EXPECT_THAT(Match(blob, params_, kTextures).refusal, HasSubstr("mipmapped array"));
}

TEST_F(TextureParamsTest, RefusesObjectsOverMemoryThatIsNotCaptured) {
  // A texture over a buffer that was freed (or never tracked).
  reg_.Add(kCtx, Linear(TextureObjectDesc::Type::kTexture, 5, 0x100000, 4096));
  std::string blob = Blob(20);
  Put(&blob, 0, 5);
  TextureParamMatch m = Match(blob, params_, kTextures);
  EXPECT_THAT(m.objects, IsEmpty());
  EXPECT_THAT(m.refusal, HasSubstr("reads 0x100000+4096, which is not inside one live allocation"));
  // Running past the end of the allocation is the same.
  reg_.Add(kCtx, Linear(TextureObjectDesc::Type::kTexture, 5, kBuf + (1u << 20) - 64, 128));
  EXPECT_THAT(Match(blob, params_, kTextures).refusal, HasSubstr("not inside one live allocation"));
  reg_.Add(kCtx, Linear(TextureObjectDesc::Type::kTexture, 5, kBuf, 0));
  EXPECT_THAT(Match(blob, params_, kTextures).refusal, HasSubstr("describes no memory"));
}

TEST_F(TextureParamsTest, Pitch2DExtentEndsAtTheLastRowsLastTexel) {
  TextureResourceDesc r;
  r.type = TextureResourceDesc::Type::kPitch2D;
  r.format = CU_AD_FORMAT_FLOAT;
  r.num_channels = 2;
  r.width = 100;  // 800 bytes a row
  r.height = 10;
  r.pitch_bytes = 1024;
  EXPECT_EQ(ResourceExtent(r), 1024u * 9 + 800);
  r.format = CU_AD_FORMAT_BC1_UNORM;  // no per-texel size: whole rows
  EXPECT_EQ(ResourceExtent(r), 1024u * 10);
  r.height = 0;
  EXPECT_EQ(ResourceExtent(r), 0u);
  r.height = uint64_t{1} << 40;  // absurd: refused as describing nothing
  EXPECT_EQ(ResourceExtent(r), 0u);

  // In the matcher: exactly that range must be tracked.
  TextureObjectDesc d = Linear(TextureObjectDesc::Type::kTexture, 5, kBuf + (1u << 20) - 10016, 0);
  d.resource.type = TextureResourceDesc::Type::kPitch2D;
  d.resource.format = CU_AD_FORMAT_FLOAT;
  d.resource.num_channels = 2;
  d.resource.width = 100;
  d.resource.height = 10;
  d.resource.pitch_bytes = 1024;
  reg_.Add(kCtx, d);
  std::string blob = Blob(20);
  Put(&blob, 0, 5);
  EXPECT_THAT(Match(blob, params_, kTextures).refusal, IsEmpty());
  d.resource.device_ptr += 8;
  reg_.Add(kCtx, d);
  EXPECT_THAT(Match(blob, params_, kTextures).refusal, HasSubstr("not inside one live allocation"));
}

}  // namespace
}  // namespace kerncap::agent::cuda
