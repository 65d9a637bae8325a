#include "common/agent_link/chunk_fingerprint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <utility>
#include <vector>

namespace kerncap::link {
namespace {

std::vector<unsigned char> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

// The definition spelled out independently of the implementation's loop:
// a one-word chunk.
TEST(ChunkFingerprintTest, OneWordMatchesTheDefinition) {
  const uint64_t w = 0x0123456789abcdefull;
  unsigned char bytes[8];
  for (int b = 0; b < 8; ++b) bytes[b] = static_cast<unsigned char>(w >> (8 * b));
  const uint64_t s0 = FingerprintMix(w + kFingerprintK0);
  const uint64_t s1 = FingerprintMix(w + kFingerprintK1);
  ChunkFingerprint f = FingerprintChunk(bytes, 8);
  EXPECT_EQ(f.lo, FingerprintMix(s0 ^ 8));
  EXPECT_EQ(f.hi, FingerprintMix(s1 ^ ~uint64_t{8}));
}

// MurmurHash3's fmix64 of a known input (a published test value: fmix64(1)).
TEST(ChunkFingerprintTest, MixIsMurmurFinalizer) {
  EXPECT_EQ(FingerprintMix(0), 0u);
  EXPECT_EQ(FingerprintMix(1), 0xb456bcfc34c2cb2cull);
}

TEST(ChunkFingerprintTest, EverySingleWordChangeChangesBothLanes) {
  auto data = RandomBytes(4096, 7);
  const ChunkFingerprint base = FingerprintChunk(data.data(), data.size());
  std::mt19937_64 rng(11);
  for (size_t word = 0; word < data.size() / 8; ++word) {
    auto copy = data;
    uint64_t w;
    std::memcpy(&w, &copy[word * 8], 8);
    w ^= (rng() | 1);
    std::memcpy(&copy[word * 8], &w, 8);
    ChunkFingerprint f = FingerprintChunk(copy.data(), copy.size());
    ASSERT_NE(f.lo, base.lo) << "word " << word;
    ASSERT_NE(f.hi, base.hi) << "word " << word;
  }
}

TEST(ChunkFingerprintTest, PositionsLengthAndTailMatter) {
  std::vector<unsigned char> a(64, 0), b(64, 0);
  a[0] = 1;
  b[8] = 1;  // the same word value at another position
  EXPECT_NE(FingerprintChunk(a.data(), 64), FingerprintChunk(b.data(), 64));
  // Zero padding is not the same as a longer chunk of zeros.
  EXPECT_NE(FingerprintChunk(a.data(), 60), FingerprintChunk(a.data(), 64));
  // Swapping two words changes it (positions are part of each term).
  std::vector<unsigned char> c(64, 0), d(64, 0);
  c[0] = 1, c[8] = 2;
  d[0] = 2, d[8] = 1;
  EXPECT_NE(FingerprintChunk(c.data(), 64), FingerprintChunk(d.data(), 64));
  // A short tail reads only its bytes.
  unsigned char tail[3] = {1, 2, 3};
  unsigned char padded[8] = {1, 2, 3, 0, 0, 0, 0, 0};
  FingerprintSums s;
  uint64_t w;
  std::memcpy(&w, padded, 8);
  s.s0 = FingerprintMix(w + kFingerprintK0);
  s.s1 = FingerprintMix(w + kFingerprintK1);
  EXPECT_EQ(FingerprintChunk(tail, 3), FinishFingerprint(s, 3));
}

TEST(ChunkFingerprintTest, NoCollisionsAmongManyChunks) {
  std::set<std::pair<uint64_t, uint64_t>> lo_hi;
  std::set<uint64_t> lo;
  auto data = RandomBytes(1 << 20, 3);
  // 4096 random 256-byte chunks and 4096 chunks that differ only in a counter.
  for (size_t i = 0; i < 4096; ++i) {
    auto f = FingerprintChunk(&data[i * 256], 256);
    lo_hi.insert({f.lo, f.hi});
    lo.insert(f.lo);
  }
  for (uint64_t i = 0; i < 4096; ++i) {
    std::vector<uint64_t> words(32, 0);
    words[31] = i;
    auto f = FingerprintChunk(words.data(), 256);
    lo_hi.insert({f.lo, f.hi});
    lo.insert(f.lo);
  }
  EXPECT_EQ(lo_hi.size(), 8192u);
  EXPECT_EQ(lo.size(), 8192u);
}

TEST(ChunkFingerprintTest, ChunksAndWireForm) {
  auto data = RandomBytes(10000, 5);
  auto fps = FingerprintChunks(data.data(), data.size(), 4096);
  ASSERT_EQ(fps.size(), 3u);
  EXPECT_EQ(fps[2], FingerprintChunk(&data[8192], 10000 - 8192));
  std::string wire = EncodeFingerprints(fps);
  ASSERT_EQ(wire.size(), 48u);
  EXPECT_EQ(static_cast<unsigned char>(wire[0]), fps[0].lo & 0xff);
  EXPECT_EQ(static_cast<unsigned char>(wire[8]), fps[0].hi & 0xff);
  std::vector<ChunkFingerprint> back;
  ASSERT_TRUE(DecodeFingerprints(wire, &back));
  EXPECT_EQ(back, fps);
  EXPECT_FALSE(DecodeFingerprints(wire.substr(0, 47), &back));
}

}  // namespace
}  // namespace kerncap::link
