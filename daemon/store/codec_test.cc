#include "format/codec.h"

#include "format/pack_format.h"
#include "daemon/store/store_test_util.h"
#include "gtest/gtest.h"

namespace kerncap::store {
namespace {

using testing::RandomBytes;
using testing::TextBytes;

TEST(CodecTest, CompressibleChunkIsZstdAndRoundTrips) {
  ChunkCompressor c(1);
  std::string raw = TextBytes(1 << 16, 3);
  std::string stored;
  auto codec = c.Encode(raw, &stored);
  ASSERT_TRUE(codec.ok());
  EXPECT_EQ(*codec, kCodecZstd);
  EXPECT_LT(stored.size(), raw.size() / 2);
  std::string out(raw.size(), '\0');
  ASSERT_TRUE(DecodeChunk(*codec, stored, raw.size(), out.data(), "c").ok());
  EXPECT_EQ(out, raw);
}

TEST(CodecTest, IncompressibleChunkIsStoredRaw) {
  ChunkCompressor c(1);
  std::string raw = RandomBytes(1 << 16, 4);
  std::string stored;
  auto codec = c.Encode(raw, &stored);
  ASSERT_TRUE(codec.ok());
  EXPECT_EQ(*codec, kCodecRaw);
  EXPECT_EQ(stored, raw);
}

TEST(CodecTest, CorruptFrameIsDataLoss) {
  ChunkCompressor c(1);
  std::string raw = TextBytes(1 << 16, 5);
  std::string stored;
  ASSERT_EQ(*c.Encode(raw, &stored), kCodecZstd);
  stored[stored.size() / 2] ^= 0x40;
  std::string out(raw.size(), '\0');
  absl::Status st = DecodeChunk(kCodecZstd, stored, raw.size(), out.data(), "chunk X");
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("chunk X"), std::string::npos);
}

TEST(CodecTest, WrongRawSizeIsDataLoss) {
  std::string raw = RandomBytes(100, 6);
  std::string out(200, '\0');
  EXPECT_EQ(DecodeChunk(kCodecRaw, raw, 200, out.data(), "c").code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace kerncap::store
