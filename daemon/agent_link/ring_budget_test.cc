// Tests of RingBudget alone: the slot-count fit, the bound, reclaiming.
#include "daemon/agent_link/ring_budget.h"

#include <cstdint>
#include <thread>

#include "gtest/gtest.h"

namespace kerncap::link {
namespace {

constexpr uint64_t kSlot = 1 << 20;

TEST(RingBudgetTest, FitTakesTheMostSlotsThatFitAndAtLeastTwo) {
  EXPECT_EQ(RingBudget::FitRingBytes(100 * kSlot, kSlot, 8), 8 * kSlot);
  EXPECT_EQ(RingBudget::FitRingBytes(5 * kSlot + 7, kSlot, 8), 5 * kSlot);
  EXPECT_EQ(RingBudget::FitRingBytes(2 * kSlot, kSlot, 8), 2 * kSlot);
  EXPECT_EQ(RingBudget::FitRingBytes(2 * kSlot - 1, kSlot, 8), 0u);
  EXPECT_EQ(RingBudget::FitRingBytes(0, kSlot, 8), 0u);
}

TEST(RingBudgetTest, UnboundedChargesWholeRings) {
  RingBudget budget;
  EXPECT_EQ(budget.Charge(kSlot, 8, nullptr, absl::ZeroDuration()), 8 * kSlot);
  EXPECT_EQ(budget.Charge(kSlot, 8, nullptr, absl::ZeroDuration()), 8 * kSlot);
  EXPECT_EQ(budget.InUse(), 16 * kSlot);
  budget.Uncharge(8 * kSlot);
  EXPECT_EQ(budget.InUse(), 8 * kSlot);
}

TEST(RingBudgetTest, TheBoundIsNeverExceeded) {
  RingBudget budget(11 * kSlot);
  EXPECT_EQ(budget.Charge(kSlot, 8, nullptr, absl::ZeroDuration()), 8 * kSlot);
  EXPECT_EQ(budget.Charge(kSlot, 8, nullptr, absl::ZeroDuration()), 3 * kSlot);  // fewer slots
  EXPECT_EQ(budget.Charge(kSlot, 8, nullptr, absl::ZeroDuration()), 0u);
  EXPECT_EQ(budget.InUse(), 11 * kSlot);
  budget.Uncharge(3 * kSlot);
  EXPECT_EQ(budget.InUse(), 8 * kSlot);
  budget.Uncharge(100 * kSlot);  // never below zero
  EXPECT_EQ(budget.InUse(), 0u);
}

TEST(RingBudgetTest, ReclaimIsAskedForTheShortfallAndWaitedFor) {
  RingBudget budget(10 * kSlot);
  ASSERT_EQ(budget.Charge(kSlot, 8, nullptr, absl::ZeroDuration()), 8 * kSlot);
  std::thread giver;
  uint64_t asked_for = 0;
  // The holder gives its ring back a little later, as an agent would.
  const uint64_t got = budget.Charge(
      kSlot, 8,
      [&](uint64_t shortfall) {
        asked_for = shortfall;
        giver = std::thread([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          budget.Uncharge(8 * kSlot);
        });
        return uint64_t{8 * kSlot};
      },
      absl::Seconds(10));
  giver.join();
  EXPECT_EQ(asked_for, 6 * kSlot);
  EXPECT_EQ(got, 8 * kSlot);
  EXPECT_EQ(budget.InUse(), 8 * kSlot);

  // Nobody to ask: what fits now, without waiting.
  bool called = false;
  EXPECT_EQ(budget.Charge(kSlot, 8,
                          [&](uint64_t) {
                            called = true;
                            return uint64_t{0};
                          },
                          absl::Seconds(10)),
            2 * kSlot);
  EXPECT_TRUE(called);
  // With a full ring free, reclaim is not asked.
  budget.Uncharge(10 * kSlot);
  EXPECT_EQ(budget.Charge(kSlot, 8, [](uint64_t) -> uint64_t { ADD_FAILURE(); return 0; },
                          absl::Seconds(10)),
            8 * kSlot);
}

// Issue 28: rings that cannot be asked back hold at most their share of the
// budget, so a capturing agent's ring always fits in the rest.
TEST(RingBudgetTest, PinnedRingsHoldAtMostTheirShare) {
  RingBudget budget(16 * kSlot);
  budget.set_max_pinned_share(0.5);
  uint64_t pinned = 0;
  for (int i = 0; i < 8; ++i) pinned += budget.Charge(kSlot, 4, nullptr, absl::ZeroDuration(), true);
  EXPECT_EQ(pinned, 8 * kSlot);
  EXPECT_EQ(budget.PinnedInUse(), 8 * kSlot);
  // The share is used up: a further pinned ring gets nothing ...
  EXPECT_EQ(budget.Charge(kSlot, 4, nullptr, absl::ZeroDuration(), true), 0u);
  // ... and reclaimable rings still get the other half.
  EXPECT_EQ(budget.Charge(kSlot, 8, nullptr, absl::ZeroDuration()), 8 * kSlot);
  budget.Uncharge(4 * kSlot, true);
  EXPECT_EQ(budget.PinnedInUse(), 4 * kSlot);
  EXPECT_EQ(budget.InUse(), 12 * kSlot);
}

}  // namespace
}  // namespace kerncap::link
