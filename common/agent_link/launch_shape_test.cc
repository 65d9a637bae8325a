#include "common/agent_link/launch_shape.h"

#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace kerncap::link {
namespace {

std::string Words(std::initializer_list<uint64_t> words) {
  std::string out;
  for (uint64_t w : words) out.append(reinterpret_cast<const char*>(&w), sizeof(w));
  return out;
}

// A pretend allocation table: [0x7000'0000'0000, +1 GiB).
bool InAllocation(uint64_t w) { return w >= 0x700000000000ull && w < 0x700040000000ull; }

uint64_t Key(PerShape mode, std::array<uint32_t, 3> grid, const std::string& blob) {
  LaunchShapeInputs in;
  in.grid = grid;
  in.block = {256, 1, 1};
  in.argument_blob = blob;
  return LaunchShapeKey(mode, in, InAllocation);
}

TEST(LaunchShapeTest, PointersIntoAllocationsDoNotMakeAShape) {
  // The same sizes with the buffers elsewhere: one shape.
  const std::string a = Words({0x700000001000ull, 0x700000200000ull, 4096});
  const std::string b = Words({0x700000800000ull, 0x700000001000ull, 4096});
  EXPECT_EQ(Key(PerShape::kScalars, {16, 1, 1}, a), Key(PerShape::kScalars, {16, 1, 1}, b));
  // A different size argument: another shape, unless only the launch counts.
  const std::string c = Words({0x700000001000ull, 0x700000200000ull, 8192});
  EXPECT_NE(Key(PerShape::kScalars, {16, 1, 1}, a), Key(PerShape::kScalars, {16, 1, 1}, c));
  EXPECT_EQ(Key(PerShape::kLaunch, {16, 1, 1}, a), Key(PerShape::kLaunch, {16, 1, 1}, c));
  // A word that is not in an allocation is a value, even if it looks like an address.
  const std::string d = Words({0x600000001000ull, 0x700000200000ull, 4096});
  const std::string e = Words({0x600000002000ull, 0x700000200000ull, 4096});
  EXPECT_NE(Key(PerShape::kScalars, {16, 1, 1}, d), Key(PerShape::kScalars, {16, 1, 1}, e));
}

TEST(LaunchShapeTest, EveryLaunchFieldCounts) {
  LaunchShapeInputs base;
  base.grid = {8, 4, 2};
  base.block = {128, 2, 1};
  base.shared_mem_bytes = 1024;
  base.cluster = {2, 1, 1};
  const uint64_t k = LaunchShapeKey(PerShape::kLaunch, base, {});
  auto changed = [&](auto edit) {
    LaunchShapeInputs in = base;
    edit(in);
    return LaunchShapeKey(PerShape::kLaunch, in, {});
  };
  EXPECT_NE(k, changed([](LaunchShapeInputs& in) { in.grid[2] = 3; }));
  EXPECT_NE(k, changed([](LaunchShapeInputs& in) { in.block[1] = 1; }));
  EXPECT_NE(k, changed([](LaunchShapeInputs& in) { in.shared_mem_bytes = 0; }));
  EXPECT_NE(k, changed([](LaunchShapeInputs& in) { in.cluster = {1, 1, 1}; }));
  // Grid and block are not interchangeable.
  EXPECT_NE(k, changed([](LaunchShapeInputs& in) { std::swap(in.grid, in.block); }));
  // The two modes never share a key for the same launch.
  EXPECT_NE(k, LaunchShapeKey(PerShape::kScalars, base, {}));
  EXPECT_EQ(0u, LaunchShapeKey(PerShape::kOff, base, {}));
}

TEST(LaunchShapeTest, TailBytesAndLengthCount) {
  std::string a = Words({4096});
  std::string b = a + std::string("\x01", 1);
  std::string c = a + std::string("\x02", 1);
  EXPECT_NE(Key(PerShape::kScalars, {1, 1, 1}, a), Key(PerShape::kScalars, {1, 1, 1}, b));
  EXPECT_NE(Key(PerShape::kScalars, {1, 1, 1}, b), Key(PerShape::kScalars, {1, 1, 1}, c));
  // A longer blob of zeros is another layout.
  EXPECT_NE(Key(PerShape::kScalars, {1, 1, 1}, Words({0})),
            Key(PerShape::kScalars, {1, 1, 1}, Words({0, 0})));
}

TEST(LaunchShapeTest, KeyText) {
  EXPECT_EQ("00000000000000ff", LaunchShapeKeyText(0xff));
  EXPECT_EQ("fedcba9876543210", LaunchShapeKeyText(0xfedcba9876543210ull));
  EXPECT_TRUE(IsLaunchShapeKey(LaunchShapeKeyText(12345)));
  EXPECT_FALSE(IsLaunchShapeKey("FEDCBA9876543210"));  // upper case is not the form
  EXPECT_FALSE(IsLaunchShapeKey("fedcba987654321"));
  EXPECT_FALSE(IsLaunchShapeKey("fedcba98765432100"));
  EXPECT_FALSE(IsLaunchShapeKey("fedcba987654321g"));
  EXPECT_FALSE(IsLaunchShapeKey(""));
}

}  // namespace
}  // namespace kerncap::link
