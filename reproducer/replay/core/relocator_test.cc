#include "reproducer/replay/core/relocator.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace kerncap::replay {
namespace {

TEST(RelocatorTest, TranslatesOnlyMovedRanges) {
  Relocator r;
  r.Add(0x7f0000000000, 0x1000, 0x500000000);
  r.Add(0x7f0000100000, 0x1000, 0x7f0000100000);  // did not move: ignored
  ASSERT_TRUE(r.Finalize().ok());
  EXPECT_EQ(r.ranges().size(), 1u);
  EXPECT_EQ(r.Translate(0x7f0000000010), 0x500000010u);
  EXPECT_EQ(r.Translate(0x7f0000000fff), 0x500000fffu);
  EXPECT_FALSE(r.Translate(0x7f0000001000).has_value());
  EXPECT_FALSE(r.Translate(0x7effffffffff).has_value());
  EXPECT_FALSE(r.Translate(0x7f0000100010).has_value());
}

TEST(RelocatorTest, PatchesAlignedPointerWordsOnly) {
  Relocator r;
  r.Add(0x7f0000000000, 0x10000, 0x600000000);
  r.Add(0x7f0000200000, 0x100, 0x700000000);
  ASSERT_TRUE(r.Finalize().ok());
  // A buffer whose application address is 4 mod 8: aligned words start at +4.
  std::vector<unsigned char> buf(4 + 8 * 4, 0);
  const uint64_t words[4] = {0x7f0000000040, 42, 0x7f0000200008, 0x7f0000300000};
  std::memcpy(buf.data() + 4, words, sizeof(words));
  EXPECT_EQ(r.PatchWords(0x1004, buf.data(), buf.size()), 2u);
  uint64_t out[4];
  std::memcpy(out, buf.data() + 4, sizeof(out));
  EXPECT_EQ(out[0], 0x600000040u);
  EXPECT_EQ(out[1], 42u);
  EXPECT_EQ(out[2], 0x700000008u);
  EXPECT_EQ(out[3], 0x7f0000300000u);  // not in a captured range
  // The same bytes seen at an aligned address: the words straddle; nothing matches.
  std::vector<unsigned char> copy(buf.begin(), buf.end());
  EXPECT_EQ(r.PatchWords(0x1000, copy.data(), copy.size()), 0u);
}

TEST(RelocatorTest, ArgumentBlobWithStructOfPointers) {
  Relocator r;
  r.Add(0x7f1000000000, 1 << 20, 0x302000000);
  ASSERT_TRUE(r.Finalize().ok());
  struct {
    uint64_t a;
    float s;
    int n;
    uint64_t b;
  } blob{0x7f1000000100, 1.5f, 7, 0x7f10000ffff8};
  EXPECT_EQ(r.PatchWords(0, &blob, sizeof(blob)), 2u);
  EXPECT_EQ(blob.a, 0x302000100u);
  EXPECT_EQ(blob.b, 0x3020ffff8u);
  EXPECT_EQ(blob.n, 7);
}

TEST(RelocatorTest, TalliesPatchedWordsPerRange) {
  Relocator r;
  r.Add(0x7f0000200000, 0x100, 0x700000000);  // added first, sorted second
  r.Add(0x7f0000000000, 0x10000, 0x600000000);
  r.Add(0x7f0000400000, 0x100, 0x800000000);   // nothing points here
  ASSERT_TRUE(r.Finalize().ok());
  PatchTally tally(r.ranges().size());
  const uint64_t words[4] = {0x7f0000000040, 0x7f0000000080, 0x7f0000200008, 7};
  uint64_t buf[4];
  std::memcpy(buf, words, sizeof(buf));
  EXPECT_EQ(r.PatchWords(0, buf, sizeof(buf), &tally), 3u);
  ASSERT_EQ(r.ranges()[0].old_va, 0x7f0000000000u);
  EXPECT_EQ(tally.count(0), 2u);
  EXPECT_EQ(tally.count(1), 1u);
  EXPECT_EQ(tally.count(2), 0u);
  EXPECT_EQ(tally.count(9), 0u);  // out of range: 0, no crash
}

TEST(RelocatorTest, OverlappingRangesAreRejected) {
  Relocator r;
  r.Add(0x1000, 0x1000, 0x9000);
  r.Add(0x1800, 0x1000, 0xa000);
  EXPECT_FALSE(r.Finalize().ok());
}

}  // namespace
}  // namespace kerncap::replay
