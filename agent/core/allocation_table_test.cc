#include "agent/core/allocation_table.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace kerncap::agent {
namespace {

Allocation Dev(uint64_t va, uint64_t size, int device = 0,
               AllocationKind kind = AllocationKind::kDevice) {
  Allocation a;
  a.va = va;
  a.size = size;
  a.device = device;
  a.kind = kind;
  return a;
}

TEST(AllocationTableTest, InsertLookupInteriorPointers) {
  AllocationTable t;
  t.Insert(Dev(0x1000, 0x100));
  t.Insert(Dev(0x2000, 0x200));
  ASSERT_TRUE(t.Lookup(0x1000).has_value());
  EXPECT_EQ(t.Lookup(0x10ff)->va, 0x1000u);  // last byte
  EXPECT_FALSE(t.Lookup(0x1100).has_value());  // one past the end
  EXPECT_FALSE(t.Lookup(0xfff).has_value());
  EXPECT_EQ(t.Lookup(0x2123)->va, 0x2000u);
  EXPECT_EQ(t.Lookup(0x2123)->size, 0x200u);
  EXPECT_EQ(t.size(), 2u);
}

TEST(AllocationTableTest, ZeroSizeIgnored) {
  AllocationTable t;
  EXPECT_EQ(t.Insert(Dev(0x1000, 0)), 0u);
  EXPECT_EQ(t.size(), 0u);
}

TEST(AllocationTableTest, EraseExactBase) {
  AllocationTable t;
  t.Insert(Dev(0x1000, 0x100));
  EXPECT_FALSE(t.Erase(0x1010));  // interior pointer does not free
  EXPECT_TRUE(t.Erase(0x1000));
  EXPECT_FALSE(t.Erase(0x1000));
  EXPECT_FALSE(t.Lookup(0x1000).has_value());
}

TEST(AllocationTableTest, OverlappingInsertReplacesStaleEntries) {
  AllocationTable t;
  t.Insert(Dev(0x1000, 0x100));
  t.Insert(Dev(0x1100, 0x100));
  t.Insert(Dev(0x3000, 0x100));
  // A new allocation covering both earlier ones: they were freed unseen.
  EXPECT_EQ(t.Insert(Dev(0x1080, 0x100, 1)), 2u);
  auto all = t.All();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].va, 0x1080u);
  EXPECT_EQ(all[0].device, 1);
  EXPECT_EQ(all[1].va, 0x3000u);
  EXPECT_FALSE(t.Lookup(0x1000).has_value());
}

TEST(AllocationTableTest, EraseRangeTrimsAndSplits) {
  AllocationTable t;
  t.Insert(Dev(0x10000, 0x4000, 0, AllocationKind::kVmmMapping));
  // Unmap the middle page of a mapping: it splits in two.
  EXPECT_EQ(t.EraseRange(0x11000, 0x1000), 1u);
  auto all = t.All();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].va, 0x10000u);
  EXPECT_EQ(all[0].size, 0x1000u);
  EXPECT_EQ(all[1].va, 0x12000u);
  EXPECT_EQ(all[1].size, 0x2000u);
  EXPECT_EQ(all[1].kind, AllocationKind::kVmmMapping);
  // Freeing the whole reservation drops everything inside.
  EXPECT_EQ(t.EraseRange(0x0, 0x100000), 2u);
  EXPECT_EQ(t.size(), 0u);
}

TEST(AllocationTableTest, OverlappingQuery) {
  AllocationTable t;
  t.Insert(Dev(0x1000, 0x100));
  t.Insert(Dev(0x2000, 0x100));
  t.Insert(Dev(0x3000, 0x100));
  auto o = t.Overlapping(0x10f0, 0x1000);  // touches the first two only
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o[0].va, 0x1000u);
  EXPECT_EQ(o[1].va, 0x2000u);
  EXPECT_TRUE(t.Overlapping(0x1100, 0xf00).empty());
}

TEST(AllocationTableTest, PerDeviceListing) {
  AllocationTable t;
  t.Insert(Dev(0x1000, 0x100, 0));
  t.Insert(Dev(0x2000, 0x100, 1));
  t.Insert(Dev(0x3000, 0x100, kAnyDevice, AllocationKind::kHostPinned));
  t.Insert(Dev(0x4000, 0x100, kAnyDevice, AllocationKind::kManaged));
  t.Insert(Dev(0x5000, 0x100, 0, AllocationKind::kDeviceAsync));
  auto d0 = t.ListForDevice(0, /*include_shared=*/false);
  ASSERT_EQ(d0.size(), 2u);
  EXPECT_EQ(d0[0].va, 0x1000u);
  EXPECT_EQ(d0[1].va, 0x5000u);
  auto d1 = t.ListForDevice(1, /*include_shared=*/true);
  ASSERT_EQ(d1.size(), 3u);
  EXPECT_EQ(d1[0].va, 0x2000u);
  EXPECT_EQ(d1[1].kind, AllocationKind::kHostPinned);
  EXPECT_EQ(d1[2].kind, AllocationKind::kManaged);
}

TEST(AllocationTableTest, EraseContextDropsOnlyThatContext) {
  AllocationTable t;
  Allocation a = Dev(0x1000, 0x100);
  a.context = 7;
  Allocation b = Dev(0x2000, 0x100);
  b.context = 8;
  t.Insert(a);
  t.Insert(b);
  EXPECT_EQ(t.EraseContext(7), 1u);
  EXPECT_FALSE(t.Lookup(0x1000).has_value());
  EXPECT_TRUE(t.Lookup(0x2000).has_value());
}

TEST(AllocationTableTest, GrantAccessSetsBits) {
  AllocationTable t;
  Allocation m = Dev(0x10000, 0x2000, 0, AllocationKind::kVmmMapping);
  m.access_mask = 0;
  t.Insert(m);
  EXPECT_EQ(t.Lookup(0x10000)->access_mask, 0u);
  EXPECT_EQ(t.GrantAccess(0x10000, 0x2000, 1ull << 0), 1u);
  EXPECT_EQ(t.Lookup(0x11000)->access_mask, 1u);
  EXPECT_EQ(t.GrantAccess(0x20000, 0x1000, 1ull << 1), 0u);
}

TEST(AllocationTableTest, ConcurrentInsertEraseLookup) {
  AllocationTable t;
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&t, th] {
      for (uint64_t i = 0; i < 2000; ++i) {
        uint64_t va = (static_cast<uint64_t>(th) << 32) + i * 0x1000;
        t.Insert(Dev(va, 0x800, th));
        EXPECT_TRUE(t.Lookup(va + 0x7ff).has_value());
        if (i % 2 == 0) {
          EXPECT_TRUE(t.Erase(va));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(t.size(), 4u * 1000u);
  EXPECT_EQ(t.ListForDevice(2, false).size(), 1000u);
}

}  // namespace
}  // namespace kerncap::agent
