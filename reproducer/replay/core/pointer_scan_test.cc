#include "reproducer/replay/core/pointer_scan.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace kerncap::replay {
namespace {

std::vector<unsigned char> Words(const std::vector<uint64_t>& words) {
  std::vector<unsigned char> out(words.size() * 8);
  std::memcpy(out.data(), words.data(), out.size());
  return out;
}

TEST(PointerScanTest, CountsAlignedWordsInsideEachRange) {
  PointerScan scan;
  const size_t a = scan.Watch(0x7000'0000'0000, 0x100);
  const size_t b = scan.Watch(0x7000'0000'1000, 0x10);
  auto bytes = Words({0x7000'0000'0000, 0x7000'0000'00ff, 0x7000'0000'0100,  // a, a, past a
                      0x7000'0000'100f, 0x6fff'ffff'ffff, 42});
  scan.Scan(0x10000, bytes.data(), bytes.size());
  EXPECT_EQ(scan.count(a), 2u);
  EXPECT_EQ(scan.count(b), 1u);
}

TEST(PointerScanTest, AlignmentIsTheApplicationAddresses) {
  PointerScan scan;
  const size_t a = scan.Watch(0x5000, 8);
  // The buffer starts 4 bytes before an 8-byte boundary of the application:
  // the word at bytes [4, 12) is aligned there, the one at [0, 8) is not.
  std::vector<unsigned char> bytes(16, 0);
  const uint64_t p = 0x5004;
  std::memcpy(bytes.data() + 4, &p, 8);
  scan.Scan(0x1004, bytes.data(), bytes.size());
  EXPECT_EQ(scan.count(a), 1u);
  PointerScan misaligned;
  const size_t m = misaligned.Watch(0x5000, 8);
  misaligned.Scan(0x1000, bytes.data(), bytes.size());  // now the pointer straddles two words
  EXPECT_EQ(misaligned.count(m), 0u);
}

TEST(PointerScanTest, OverlappingRangesBothCountAndEmptyOnesNever) {
  PointerScan scan;
  const size_t outer = scan.Watch(0x1000, 0x1000);
  const size_t inner = scan.Watch(0x1800, 0x10);
  const size_t empty = scan.Watch(0x1800, 0);
  auto bytes = Words({0x1808, 0x1000, 0x0});
  scan.Scan(0, bytes.data(), bytes.size());
  EXPECT_EQ(scan.count(outer), 2u);
  EXPECT_EQ(scan.count(inner), 1u);
  EXPECT_EQ(scan.count(empty), 0u);
  EXPECT_EQ(scan.count(99), 0u);
}

TEST(PointerScanTest, NoRangesScansNothing) {
  PointerScan scan;
  auto bytes = Words({1, 2, 3});
  scan.Scan(0, bytes.data(), bytes.size());
  EXPECT_EQ(scan.ranges(), 0u);
}

}  // namespace
}  // namespace kerncap::replay
