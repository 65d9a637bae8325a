#include "agent/cuda/param_blob.h"

#include <cuda.h>

#include <cstring>

#include "gtest/gtest.h"

namespace kerncap::agent::cuda {
namespace {

TEST(ParamBlobTest, FromKernelParamsPlacesValuesAtOffsetsWithZeroPadding) {
  // kernel(float* p, int n, double d, char c): offsets 0, 8, 16, 24.
  uint64_t p = 0x7f0012345600ull;
  int n = 1000;
  double d = 2.5;
  char c = 'z';
  void* params[] = {&p, &n, &d, &c};
  std::vector<ParamInfo> layout = {{0, 8}, {8, 4}, {16, 8}, {24, 1}};
  auto blob = BlobFromKernelParams(params, layout);
  ASSERT_TRUE(blob.ok()) << blob.error();
  ASSERT_EQ(blob->size(), 25u);
  uint64_t p2;
  std::memcpy(&p2, blob->data(), 8);
  EXPECT_EQ(p2, p);
  int n2;
  std::memcpy(&n2, blob->data() + 8, 4);
  EXPECT_EQ(n2, n);
  EXPECT_EQ(std::string(blob->data() + 12, 4), std::string(4, '\0'));  // padding
  double d2;
  std::memcpy(&d2, blob->data() + 16, 8);
  EXPECT_EQ(d2, d);
  EXPECT_EQ((*blob)[24], 'z');
}

TEST(ParamBlobTest, LargeByValueStruct) {
  // cuBLAS passes one 736-byte struct by value.
  std::string s(736, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i);
  void* params[] = {s.data()};
  auto blob = BlobFromKernelParams(params, {{0, 736}});
  ASSERT_TRUE(blob.ok());
  EXPECT_EQ(*blob, s);
}

TEST(ParamBlobTest, CompareParamLayouts) {
  const std::vector<ParamInfo> a = {{0, 8}, {8, 4}};
  EXPECT_EQ(CompareParamLayouts(a, a), "");
  EXPECT_EQ(CompareParamLayouts({}, {}), "");
  EXPECT_NE(CompareParamLayouts(a, {{0, 8}}).find("takes 2 parameters, the variant 1"),
            std::string::npos);
  const std::string why = CompareParamLayouts(a, {{0, 8}, {8, 8}});
  EXPECT_NE(why.find("parameter 1"), std::string::npos) << why;
  EXPECT_NE(CompareParamLayouts(a, {{0, 8}, {12, 4}}), "");
}

TEST(ParamBlobTest, NoParams) {
  auto blob = AssembleParamBlob(nullptr, nullptr, {});
  ASSERT_TRUE(blob.ok());
  EXPECT_TRUE(blob->empty());
}

TEST(ParamBlobTest, RejectsBadLayouts) {
  int x = 0;
  void* params[] = {&x};
  EXPECT_FALSE(BlobFromKernelParams(params, {{40000, 4}}).ok());
  EXPECT_FALSE(BlobFromKernelParams(nullptr, {{0, 4}}).ok());
  void* null_params[] = {nullptr};
  EXPECT_FALSE(BlobFromKernelParams(null_params, {{0, 4}}).ok());
}

TEST(ParamBlobTest, FromExtraBufferPointer) {
  char buffer[40];
  for (int i = 0; i < 40; ++i) buffer[i] = static_cast<char>(100 + i);
  size_t size = sizeof(buffer);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  auto blob = AssembleParamBlob(nullptr, extra, {{0, 8}});  // layout is ignored for `extra`
  ASSERT_TRUE(blob.ok()) << blob.error();
  EXPECT_EQ(*blob, std::string(buffer, 40));
}

TEST(ParamBlobTest, FromExtraSizeFirst) {
  char buffer[4] = {1, 2, 3, 4};
  size_t size = 4;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_BUFFER_POINTER, buffer,
                   CU_LAUNCH_PARAM_END};
  auto blob = BlobFromExtra(extra);
  ASSERT_TRUE(blob.ok());
  EXPECT_EQ(*blob, std::string(buffer, 4));
}

TEST(ParamBlobTest, ExtraErrors) {
  void* no_size[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, nullptr, CU_LAUNCH_PARAM_END};
  EXPECT_FALSE(BlobFromExtra(no_size).ok());
  size_t size = 8;
  void* unknown[] = {reinterpret_cast<void*>(0x77), &size, CU_LAUNCH_PARAM_END};
  EXPECT_FALSE(BlobFromExtra(unknown).ok());
}

}  // namespace
}  // namespace kerncap::agent::cuda
