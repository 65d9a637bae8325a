#include "reproducer/replay/serve/compare_plan.h"

#include <cstring>

#include "gtest/gtest.h"

namespace kerncap::replay::serve {
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

}  // namespace
}  // namespace kerncap::replay::serve
