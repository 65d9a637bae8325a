#include "reproducer/replay/core/reservation_planner.h"

#include "gtest/gtest.h"

namespace kerncap::replay {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

TEST(ReservationPlannerTest, RegionsSharingAGranuleShareOneMapping) {
  // cudaMalloc packs small buffers into one 2 MiB page.
  auto plan = PlanReservations({{0x7f0000001000, 4096, 0}, {0x7f0000000000, 256, 1},
                                {0x7f0000100000, 8192, 2}},
                               PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 1u);
  const Reservation& r = (*plan)[0];
  EXPECT_EQ(r.va, 0x7f0000000000u);
  EXPECT_EQ(r.size, kGiB);  // padded to the minimum reservation
  ASSERT_EQ(r.mappings.size(), 1u);
  EXPECT_EQ(r.mappings[0].va, 0x7f0000000000u);
  EXPECT_EQ(r.mappings[0].size, 2 * kMiB);
  EXPECT_EQ(r.mappings[0].region_indices, (std::vector<size_t>{1, 0, 2}));
}

TEST(ReservationPlannerTest, TouchingGranulesMergeAndUnalignedRegionsAreRounded) {
  auto plan = PlanReservations({{0x7f0000000000 + kMiB, 2 * kMiB, 0},  // spans 2 granules
                                {0x7f0000000000 + 4 * kMiB, kMiB, 1},  // touches the end
                                {0x7f0000000000 + 10 * kMiB, kMiB, 2}},
                               PlanOptions{});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 1u);
  const auto& m = (*plan)[0].mappings;
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].va, 0x7f0000000000u);
  EXPECT_EQ(m[0].size, 6 * kMiB);
  EXPECT_EQ(m[1].va, 0x7f0000000000u + 10 * kMiB);
  EXPECT_EQ(m[1].size, 2 * kMiB);
}

TEST(ReservationPlannerTest, FarApartRangesGetSeparateReservations) {
  auto plan = PlanReservations({{0x302000000, 8 * kMiB, 0}, {0x7f0000000000, 3 * kGiB, 1},
                                {0x7f0000000000 + 3 * kGiB + kMiB * 100, kMiB, 2}},
                               PlanOptions{});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_EQ((*plan)[0].va, 0x302000000u);
  EXPECT_EQ((*plan)[0].size, kGiB);  // 8 MiB pool range enlarged to 1 GiB (honoured 6/6)
  EXPECT_EQ((*plan)[1].va, 0x7f0000000000u);
  EXPECT_EQ((*plan)[1].mappings.size(), 2u);
  EXPECT_EQ((*plan)[1].size, 3 * kGiB + 102 * kMiB);
}

TEST(ReservationPlannerTest, PaddingNeverReachesTheNextReservation) {
  PlanOptions o;
  o.cluster_gap = 64 * kMiB;  // smaller than the 1 GiB minimum
  auto plan = PlanReservations({{0x7f0000000000, kMiB, 0}, {0x7f0000000000 + 512 * kMiB, kMiB, 1}},
                               o);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_EQ((*plan)[0].size, 512 * kMiB);
  EXPECT_EQ((*plan)[1].size, kGiB);
}

TEST(ReservationPlannerTest, IgnoresEmptyRegionsAndRejectsBadInput) {
  auto plan = PlanReservations({{0x7f0000000000, 0, 0}}, PlanOptions{});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->empty());
  PlanOptions bad;
  bad.granularity = 3 * kMiB;
  EXPECT_FALSE(PlanReservations({{0x7f0000000000, 1, 0}}, bad).ok());
  EXPECT_FALSE(PlanReservations({{UINT64_MAX - 10, 100, 0}}, PlanOptions{}).ok());
}

}  // namespace
}  // namespace kerncap::replay
