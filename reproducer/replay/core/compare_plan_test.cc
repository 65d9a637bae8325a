#include "reproducer/replay/core/compare_plan.h"

#include <cstring>

#include "gtest/gtest.h"

namespace kerncap::replay {
namespace {

TEST(ComparePlanTest, TilesCoverEveryRegion) {
  auto tiles = PlanTiles({0, 100, 1000, 512}, 256);
  ASSERT_EQ(tiles.size(), 1u + 4u + 2u);
  EXPECT_EQ(tiles[0].region, 1u);
  EXPECT_EQ(tiles[0].length, 100u);
  EXPECT_EQ(tiles[1].region, 2u);
  EXPECT_EQ(tiles[4].offset, 768u);
  EXPECT_EQ(tiles[4].length, 232u);
  EXPECT_EQ(tiles[5].region, 3u);
  EXPECT_EQ(tiles[6].offset, 256u);
  EXPECT_EQ(tiles[6].length, 256u);
}

TEST(ComparePlanTest, RegionParametersAndStats) {
  KcCompareRegion r = MakeCompareRegion(0x1000, 0x2000, 64, DType::kBF16,
                                        Tolerance{0.5, 0.25, 3, false});
  EXPECT_EQ(r.dtype, KC_CMP_BF16);
  EXPECT_EQ(r.elem_size, 2u);
  EXPECT_EQ(r.flags, 0u);  // not exact, NaN unequal
  EXPECT_EQ(r.atol, 0.5);
  EXPECT_EQ(r.ulp, 3u);
  KcCompareRegion e = MakeCompareRegion(0, 0, 8, DType::kBytes, Tolerance{});
  EXPECT_EQ(e.flags, KC_CMP_FLAG_EXACT | KC_CMP_FLAG_NAN_EQUAL);

  KcCompareStats raw = {};
  CompareStats none = ToCompareStats(raw);
  EXPECT_EQ(none.first_fail_offset, -1);
  EXPECT_EQ(none.first_diff_offset, -1);
  raw.failing = 2;
  raw.differing = 3;
  raw.first_fail_inv = ~uint64_t{40};
  raw.first_diff_inv = ~uint64_t{0};
  const double worst = 1.5;
  std::memcpy(&raw.worst_abs_bits, &worst, 8);
  CompareStats s = ToCompareStats(raw);
  EXPECT_EQ(s.elements_failing, 2u);
  EXPECT_EQ(s.elements_differing, 3u);
  EXPECT_EQ(s.first_fail_offset, 40);
  EXPECT_EQ(s.first_diff_offset, 0);
  EXPECT_EQ(s.max_abs_error, 1.5);
}

TEST(ComparePlanTest, UnitsAreRunsOfWholeChunks) {
  // 4 KiB chunks into units of at most 9000 bytes: 2 chunks each, the last
  // chunk alone (8192 + 1000 would exceed 9000).
  auto u = PlanCompareUnits({4096, 4096, 4096, 4096, 1000}, 9000);
  ASSERT_EQ(u.size(), 3u);
  EXPECT_EQ(u[0].offset, 0u);
  EXPECT_EQ(u[0].length, 8192u);
  EXPECT_EQ(u[0].first_chunk, 0u);
  EXPECT_EQ(u[0].chunks, 2u);
  EXPECT_EQ(u[1].offset, 8192u);
  EXPECT_EQ(u[1].first_chunk, 2u);
  EXPECT_EQ(u[2].offset, 16384u);
  EXPECT_EQ(u[2].length, 1000u);
  EXPECT_EQ(u[2].first_chunk, 4u);
  EXPECT_EQ(u[2].chunks, 1u);
  // A chunk larger than the unit is a unit of its own.
  auto big = PlanCompareUnits({3u << 20, 3u << 20}, 1u << 20);
  ASSERT_EQ(big.size(), 2u);
  EXPECT_EQ(big[1].offset, 3u << 20);
  EXPECT_TRUE(PlanCompareUnits({}).empty());
}

TEST(ComparePlanTest, MarginIsAtLeastOneGiB) {
  EXPECT_EQ(DeviceCompareMargin(8ull << 30), 1ull << 30);
  EXPECT_EQ(DeviceCompareMargin(140ull << 30), 7ull << 30);
}

}  // namespace
}  // namespace kerncap::replay
