#include "common/texture_layout.h"

#include "gtest/gtest.h"

namespace kerncap {
namespace {

TEST(TexelBytesTest, PlainAndNamedFormats) {
  EXPECT_EQ(TexelBytes(0x20, 1), 4u);   // float
  EXPECT_EQ(TexelBytes(0x20, 4), 16u);  // float4
  EXPECT_EQ(TexelBytes(0x10, 2), 4u);   // half2
  EXPECT_EQ(TexelBytes(0x08, 1), 1u);   // char
  EXPECT_EQ(TexelBytes(0x03, 3), 0u);   // no 3-channel elements
  EXPECT_EQ(TexelBytes(0xc5, 4), 8u);   // UNORM_INT16X4
  EXPECT_EQ(TexelBytes(0x91, 4), 0u);   // BC1: no per-texel size
}

TEST(Pitch2DExtentTest, EndsAtTheLastRowsLastTexel) {
  EXPECT_EQ(Pitch2DExtent(0x20, 2, 100, 10, 1024), 1024u * 9 + 800);
  EXPECT_EQ(Pitch2DExtent(0x91, 4, 100, 10, 1024), 1024u * 10);  // unknown texel: whole rows
  EXPECT_EQ(Pitch2DExtent(0x20, 1, 100, 0, 1024), 0u);
  EXPECT_EQ(Pitch2DExtent(0x20, 1, 100, uint64_t{1} << 40, 1024), 0u);
}

}  // namespace
}  // namespace kerncap
