// Recreation of captured texture/surface objects against a fake CUDA driver
// (CudaDriver's entry points pointed at the functions below): what the
// driver is asked to create, which argument words are patched, what is
// refused and that nothing stays created after a failure. CPU only.
#include "reproducer/replay/cuda/texture_objects.h"

#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kerncap::replay {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The fake driver's state (one test at a time).
struct FakeDriver {
  std::vector<CUDA_RESOURCE_DESC> tex_res;
  std::vector<CUDA_TEXTURE_DESC> tex_desc;
  std::vector<bool> tex_had_view;
  std::vector<CUDA_RESOURCE_VIEW_DESC> tex_view;
  std::vector<CUDA_RESOURCE_DESC> surf_res;
  std::vector<uint64_t> destroyed;
  uint64_t next_handle = 0x100;
  int fail_on_create = -1;  // the n-th create (0-based) fails
  int creates = 0;
  int live = 0;
};
FakeDriver* g_fake = nullptr;

CUresult FakeTexCreate(CUtexObject* h, const CUDA_RESOURCE_DESC* res, const CUDA_TEXTURE_DESC* tex,
                       const CUDA_RESOURCE_VIEW_DESC* view) {
  if (g_fake->creates++ == g_fake->fail_on_create) return CUDA_ERROR_INVALID_VALUE;
  g_fake->tex_res.push_back(*res);
  g_fake->tex_desc.push_back(*tex);
  g_fake->tex_had_view.push_back(view != nullptr);
  if (view != nullptr) g_fake->tex_view.push_back(*view);
  *h = g_fake->next_handle++;
  ++g_fake->live;
  return CUDA_SUCCESS;
}
CUresult FakeSurfCreate(CUsurfObject* h, const CUDA_RESOURCE_DESC* res) {
  if (g_fake->creates++ == g_fake->fail_on_create) return CUDA_ERROR_INVALID_VALUE;
  g_fake->surf_res.push_back(*res);
  *h = g_fake->next_handle++;
  ++g_fake->live;
  return CUDA_SUCCESS;
}
CUresult FakeTexDestroy(CUtexObject h) {
  g_fake->destroyed.push_back(h);
  --g_fake->live;
  return CUDA_SUCCESS;
}
CUresult FakeSurfDestroy(CUsurfObject h) { return FakeTexDestroy(h); }
CUresult FakeErrorName(CUresult, const char** s) {
  *s = "CUDA_ERROR_INVALID_VALUE";
  return CUDA_SUCCESS;
}
CUresult FakeErrorString(CUresult, const char** s) {
  *s = "invalid argument";
  return CUDA_SUCCESS;
}

constexpr uint64_t kBuf = 0x7f0000100000;  // captured region of 1 MiB
constexpr uint64_t kMoved = 0x7e0000000000;  // where the replay put it

class TextureObjectsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_fake = &fake_;
    cu_.cuTexObjectCreate = FakeTexCreate;
    cu_.cuTexObjectDestroy = FakeTexDestroy;
    cu_.cuSurfObjectCreate = FakeSurfCreate;
    cu_.cuSurfObjectDestroy = FakeSurfDestroy;
    cu_.cuGetErrorName = FakeErrorName;
    cu_.cuGetErrorString = FakeErrorString;
  }
  void TearDown() override { g_fake = nullptr; }

  // A relocated replay: the region moved to kMoved.
  static absl::StatusOr<uint64_t> Place(uint64_t va, uint64_t size) {
    if (va >= kBuf && size <= (1u << 20) && va - kBuf <= (1u << 20) - size) {
      return kMoved + (va - kBuf);
    }
    return absl::FailedPreconditionError("its memory is in no restored region");
  }

  // tex(cudaTextureObject_t t, float* out, cudaTextureObject_t again): the
  // handle 5 at offsets 0 and 16, a pointer at 8.
  static v1::CaptureManifest Manifest() {
    v1::CaptureManifest m;
    std::string blob(24, '\0');
    uint64_t h = 5, p = kBuf + 4096;
    std::memcpy(blob.data(), &h, 8);
    std::memcpy(blob.data() + 8, &p, 8);
    std::memcpy(blob.data() + 16, &h, 8);
    m.set_argument_blob(blob);
    v1::TextureObject* t = m.add_texture_objects();
    t->set_type(v1::TextureObject::TEXTURE_OBJECT);
    t->set_handle(5);
    t->add_argument_offsets(0);
    t->add_argument_offsets(16);
    v1::TextureResource* r = t->mutable_resource();
    r->set_type(v1::TextureResource::RESOURCE_PITCH2D);
    r->set_device_ptr(kBuf + 256);
    r->set_format(CU_AD_FORMAT_FLOAT);
    r->set_num_channels(1);
    r->set_width(60);
    r->set_height(40);
    r->set_pitch_bytes(256);
    v1::TextureSampling* s = t->mutable_sampling();
    s->add_address_mode(CU_TR_ADDRESS_MODE_CLAMP);
    s->add_address_mode(CU_TR_ADDRESS_MODE_BORDER);
    s->add_address_mode(CU_TR_ADDRESS_MODE_WRAP);
    s->set_filter_mode(CU_TR_FILTER_MODE_LINEAR);
    s->set_flags(CU_TRSF_NORMALIZED_COORDINATES);
    s->set_max_anisotropy(4);
    s->set_mipmap_level_bias(0.5f);
    for (float c : {0.25f, 0.5f, 0.75f, 1.0f}) s->add_border_color(c);
    return m;
  }

  FakeDriver fake_;
  CudaDriver cu_;
};

TEST_F(TextureObjectsTest, RecreatesFromTheRecordedDescriptorOverTheReplaysMemory) {
  v1::CaptureManifest m = Manifest();
  std::string args = m.argument_blob();
  TextureObjects tex(cu_);
  ASSERT_TRUE(tex.Create(m, Place, &args).ok());
  ASSERT_EQ(fake_.tex_res.size(), 1u);
  const CUDA_RESOURCE_DESC& res = fake_.tex_res[0];
  EXPECT_EQ(res.resType, CU_RESOURCE_TYPE_PITCH2D);
  EXPECT_EQ(res.res.pitch2D.devPtr, kMoved + 256);  // translated
  EXPECT_EQ(res.res.pitch2D.format, CU_AD_FORMAT_FLOAT);
  EXPECT_EQ(res.res.pitch2D.numChannels, 1u);
  EXPECT_EQ(res.res.pitch2D.width, 60u);
  EXPECT_EQ(res.res.pitch2D.height, 40u);
  EXPECT_EQ(res.res.pitch2D.pitchInBytes, 256u);
  const CUDA_TEXTURE_DESC& d = fake_.tex_desc[0];
  EXPECT_EQ(d.addressMode[0], CU_TR_ADDRESS_MODE_CLAMP);
  EXPECT_EQ(d.addressMode[1], CU_TR_ADDRESS_MODE_BORDER);
  EXPECT_EQ(d.addressMode[2], CU_TR_ADDRESS_MODE_WRAP);
  EXPECT_EQ(d.filterMode, CU_TR_FILTER_MODE_LINEAR);
  EXPECT_EQ(d.flags, static_cast<unsigned>(CU_TRSF_NORMALIZED_COORDINATES));
  EXPECT_EQ(d.maxAnisotropy, 4u);
  EXPECT_EQ(d.mipmapLevelBias, 0.5f);
  EXPECT_EQ(d.borderColor[2], 0.75f);
  EXPECT_FALSE(fake_.tex_had_view[0]);  // none recorded: none passed

  // Both words that held 5 now hold the new handle; the pointer is untouched.
  uint64_t w0, w1, w2;
  std::memcpy(&w0, args.data(), 8);
  std::memcpy(&w1, args.data() + 8, 8);
  std::memcpy(&w2, args.data() + 16, 8);
  EXPECT_EQ(w0, 0x100u);
  EXPECT_EQ(w1, kBuf + 4096);
  EXPECT_EQ(w2, 0x100u);
  ASSERT_EQ(tex.objects().size(), 1u);
  EXPECT_EQ(tex.objects()[0].captured_handle, 5u);
  EXPECT_EQ(tex.objects()[0].replay_handle, 0x100u);
  EXPECT_EQ(tex.objects()[0].replay_ptr, kMoved + 256);
  EXPECT_EQ(tex.objects()[0].bytes, 256u * 39 + 240);
  EXPECT_EQ(tex.objects()[0].resource, "pitch2d");
  EXPECT_THAT(tex.objects()[0].argument_offsets, ElementsAre(0u, 16u));

  tex.Destroy();
  EXPECT_THAT(fake_.destroyed, ElementsAre(0x100u));
  EXPECT_EQ(fake_.live, 0);
  tex.Destroy();  // idempotent
  EXPECT_EQ(fake_.destroyed.size(), 1u);
}

TEST_F(TextureObjectsTest, LinearTexturesViewsAndSurfaces) {
  v1::CaptureManifest m = Manifest();
  v1::TextureObject* t = m.mutable_texture_objects(0);
  t->mutable_resource()->Clear();
  t->mutable_resource()->set_type(v1::TextureResource::RESOURCE_LINEAR);
  t->mutable_resource()->set_device_ptr(kBuf);
  t->mutable_resource()->set_format(CU_AD_FORMAT_UNSIGNED_INT8);
  t->mutable_resource()->set_num_channels(4);
  t->mutable_resource()->set_size_bytes(65536);
  t->mutable_view()->set_format(CU_RES_VIEW_FORMAT_UINT_4X8);
  t->mutable_view()->set_width(16384);
  // A surface object whose handle sits at offset 8 (a surface over linear
  // memory: the driver refuses that in reality; the fake only records).
  std::string blob = m.argument_blob();
  uint64_t h = 5;
  std::memcpy(blob.data() + 8, &h, 8);
  m.set_argument_blob(blob);
  v1::TextureObject* s = m.add_texture_objects();
  s->set_type(v1::TextureObject::SURFACE_OBJECT);
  s->set_handle(5);
  s->add_argument_offsets(8);
  s->mutable_resource()->set_type(v1::TextureResource::RESOURCE_LINEAR);
  s->mutable_resource()->set_device_ptr(kBuf + 65536);
  s->mutable_resource()->set_size_bytes(4096);

  std::string args = m.argument_blob();
  TextureObjects tex(cu_);
  ASSERT_TRUE(tex.Create(m, Place, &args).ok());
  ASSERT_EQ(fake_.tex_res.size(), 1u);
  EXPECT_EQ(fake_.tex_res[0].resType, CU_RESOURCE_TYPE_LINEAR);
  EXPECT_EQ(fake_.tex_res[0].res.linear.devPtr, kMoved);
  EXPECT_EQ(fake_.tex_res[0].res.linear.sizeInBytes, 65536u);
  EXPECT_EQ(fake_.tex_res[0].res.linear.numChannels, 4u);
  ASSERT_TRUE(fake_.tex_had_view[0]);
  EXPECT_EQ(fake_.tex_view[0].format, CU_RES_VIEW_FORMAT_UINT_4X8);
  EXPECT_EQ(fake_.tex_view[0].width, 16384u);
  ASSERT_EQ(fake_.surf_res.size(), 1u);
  EXPECT_EQ(fake_.surf_res[0].res.linear.devPtr, kMoved + 65536);
  uint64_t w1;
  std::memcpy(&w1, args.data() + 8, 8);
  EXPECT_EQ(w1, 0x101u);
  EXPECT_TRUE(tex.objects()[1].surface);
}

TEST_F(TextureObjectsTest, ADriverRefusalNamesTheObjectAndLeavesNothingCreated) {
  v1::CaptureManifest m = Manifest();
  v1::TextureObject second = m.texture_objects(0);
  second.set_handle(7);
  second.clear_argument_offsets();
  second.add_argument_offsets(24);
  std::string blob = m.argument_blob();
  uint64_t h = 7;
  blob.append(reinterpret_cast<const char*>(&h), 8);
  m.set_argument_blob(blob);
  *m.add_texture_objects() = second;
  fake_.fail_on_create = 1;  // the second one: the driver says the descriptor is wrong
  std::string args = m.argument_blob();
  TextureObjects tex(cu_);
  absl::Status st = tex.Create(m, Place, &args);
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("recreating the texture object 0x7 (argument offset 24) "
                                      "from its recorded descriptor failed: cuTexObjectCreate: "
                                      "CUDA_ERROR_INVALID_VALUE"));
  EXPECT_EQ(fake_.live, 0);  // the first one was destroyed again
  EXPECT_TRUE(tex.objects().empty());
}

TEST_F(TextureObjectsTest, MemoryOutsideTheRestoredRegionsIsRefused) {
  v1::CaptureManifest m = Manifest();
  m.mutable_texture_objects(0)->mutable_resource()->set_device_ptr(0x1000);
  std::string args = m.argument_blob();
  TextureObjects tex(cu_);
  absl::Status st = tex.Create(m, Place, &args);
  EXPECT_THAT(st.message(), HasSubstr("recreating the texture object 0x5 (argument offset 0): "
                                      "its memory is in no restored region"));
  EXPECT_EQ(fake_.creates, 0);
}

TEST_F(TextureObjectsTest, CheckRefusesArraysAndMalformedObjects) {
  auto check = [](const v1::CaptureManifest& m) { return TextureObjects::Check(m); };
  EXPECT_TRUE(check(Manifest()).ok());
  EXPECT_TRUE(check(v1::CaptureManifest{}).ok());

  v1::CaptureManifest m = Manifest();
  m.mutable_texture_objects(0)->mutable_resource()->set_type(v1::TextureResource::RESOURCE_ARRAY);
  absl::Status st = check(m);
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("texture object 0x5 (argument offset 0) reads a CUDA array"));
  m.mutable_texture_objects(0)->mutable_resource()->set_type(
      v1::TextureResource::RESOURCE_MIPMAPPED_ARRAY);
  EXPECT_THAT(check(m).message(), HasSubstr("mipmapped array"));

  m = Manifest();
  m.mutable_texture_objects(0)->set_argument_offsets(1, 8);  // holds the pointer, not 5
  EXPECT_THAT(check(m).message(), HasSubstr("offset 8 holds 0x7f0000101000, not the handle"));
  m = Manifest();
  m.mutable_texture_objects(0)->set_argument_offsets(1, 20);
  EXPECT_THAT(check(m).message(), HasSubstr("offset 20 is not an aligned word"));
  m = Manifest();
  m.mutable_texture_objects(0)->set_argument_offsets(1, 24);
  EXPECT_THAT(check(m).message(), HasSubstr("offset 24 is not an aligned word"));
  m = Manifest();
  m.mutable_texture_objects(0)->clear_argument_offsets();
  EXPECT_THAT(check(m).message(), HasSubstr("0 argument offsets"));
  m = Manifest();
  *m.add_texture_objects() = m.texture_objects(0);
  EXPECT_THAT(check(m).message(), HasSubstr("offset 0 is named by two objects"));
  m = Manifest();
  m.mutable_texture_objects(0)->set_type(v1::TextureObject::TEXTURE_OBJECT_TYPE_UNSPECIFIED);
  EXPECT_THAT(check(m).message(), HasSubstr("unknown object type"));
  m = Manifest();
  m.mutable_texture_objects(0)->mutable_resource()->set_height(0);
  EXPECT_THAT(check(m).message(), HasSubstr("describes no memory"));
  m = Manifest();
  m.mutable_texture_objects(0)->mutable_sampling()->add_address_mode(0);
  EXPECT_THAT(check(m).message(), HasSubstr("more than 3 address modes"));

  // Create refuses what Check refuses, before asking the driver anything.
  m = Manifest();
  m.mutable_texture_objects(0)->mutable_resource()->set_type(v1::TextureResource::RESOURCE_ARRAY);
  std::string args = m.argument_blob();
  TextureObjects tex(cu_);
  EXPECT_FALSE(tex.Create(m, Place, &args).ok());
  EXPECT_EQ(fake_.creates, 0);
}

}  // namespace
}  // namespace kerncap::replay
