#include "reproducer/replay/core/launch_override.h"

#include "gtest/gtest.h"

namespace kerncap::replay {
namespace {

TEST(LaunchOverrideTest, ParsesDimsInEveryForm) {
  EXPECT_EQ(*ParseDim3("256"), (Dim3{256, 1, 1}));
  EXPECT_EQ(*ParseDim3("16,8"), (Dim3{16, 8, 1}));
  EXPECT_EQ(*ParseDim3("4x4x2"), (Dim3{4, 4, 2}));
  EXPECT_FALSE(ParseDim3("0").ok());
  EXPECT_FALSE(ParseDim3("1,2,3,4").ok());
  EXPECT_FALSE(ParseDim3("-3").ok());
  EXPECT_FALSE(ParseDim3("abc").ok());
}

TEST(LaunchOverrideTest, AppliesOverTheCapturedLaunch) {
  v1::LaunchConfig l;
  l.add_grid(4);
  l.add_block(256);
  l.set_shared_mem_bytes(128);
  LaunchShape captured = CapturedLaunch(l);
  EXPECT_EQ(captured.grid, (Dim3{4, 1, 1}));
  EXPECT_EQ(captured.block, (Dim3{256, 1, 1}));
  LaunchOverride o;
  o.block = Dim3{128, 1, 1};
  o.grid = Dim3{8, 1, 1};
  auto s = ApplyLaunchOverride(captured, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->block, (Dim3{128, 1, 1}));
  EXPECT_EQ(s->shared_mem_bytes, 128u);
  EXPECT_EQ(DescribeLaunch(*s), "grid=(8,1,1) block=(128,1,1) smem=128");
  EXPECT_TRUE(o.changes_shape());
  LaunchOverride hint;
  hint.cache_preference = CachePreference::kL1;
  EXPECT_FALSE(hint.changes_shape());
  EXPECT_FALSE(hint.empty());
}

TEST(LaunchOverrideTest, RefusesWhatNoDeviceCanLaunch) {
  LaunchShape captured;
  LaunchOverride o;
  o.block = Dim3{64, 32, 1};  // 2048 threads
  auto s = ApplyLaunchOverride(captured, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("2048 threads"), std::string::npos) << s.status();
  o = {};
  o.grid = Dim3{6, 1, 1};
  o.cluster = Dim3{4, 1, 1};
  s = ApplyLaunchOverride(captured, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("not a multiple"), std::string::npos);
  o.cluster = Dim3{32, 1, 1};
  o.grid = Dim3{64, 1, 1};
  EXPECT_FALSE(ApplyLaunchOverride(captured, o).ok());  // > 16 blocks
  o = {};
  o.shared_mem_bytes = 100000;
  o.max_dynamic_shared_mem = 65536;
  EXPECT_FALSE(ApplyLaunchOverride(captured, o).ok());
  o = {};
  o.grid = Dim3{1, 70000, 1};
  EXPECT_FALSE(ApplyLaunchOverride(captured, o).ok());
  captured.cooperative = true;
  o = {};
  o.cluster = Dim3{2, 1, 1};
  o.grid = Dim3{2, 1, 1};
  EXPECT_FALSE(ApplyLaunchOverride(captured, o).ok());
}

TEST(LaunchOverrideTest, TheCapturedShapeIsNotSecondGuessed) {
  LaunchShape odd;  // a cluster that does not divide the grid, as captured
  odd.grid = Dim3{391, 2, 1};
  odd.cluster = Dim3{2, 1, 1};
  EXPECT_TRUE(ApplyLaunchOverride(odd, LaunchOverride{}).ok());
  LaunchOverride hint;
  hint.cache_preference = CachePreference::kL1;
  EXPECT_TRUE(ApplyLaunchOverride(odd, hint).ok());
  LaunchOverride grid;
  grid.grid = Dim3{390, 2, 1};
  EXPECT_TRUE(ApplyLaunchOverride(odd, grid).ok());
  grid.grid = Dim3{391, 2, 1};
  EXPECT_FALSE(ApplyLaunchOverride(odd, grid).ok());
}

TEST(LaunchOverrideTest, JsonRoundTripsAndRefusesUnknownKeys) {
  LaunchOverride o;
  o.grid = Dim3{2, 3, 1};
  o.block = Dim3{32, 1, 1};
  o.shared_mem_bytes = 4096;
  o.max_dynamic_shared_mem = 8192;
  o.cache_preference = CachePreference::kShared;
  o.cluster = Dim3{2, 1, 1};
  nlohmann::json j = LaunchOverrideJson(o);
  auto back = LaunchOverrideFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(LaunchOverrideJson(*back), j);
  EXPECT_EQ(*LaunchOverrideFromJson(nlohmann::json{{"block", "16x16"}})->block,
            (Dim3{16, 16, 1}));
  auto bad = LaunchOverrideFromJson(nlohmann::json{{"blocks", {1}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown key \"blocks\""), std::string::npos);
  EXPECT_FALSE(LaunchOverrideFromJson(nlohmann::json{{"grid", {0}}}).ok());
  EXPECT_FALSE(LaunchOverrideFromJson(nlohmann::json{{"shared_mem_bytes", -1}}).ok());
  EXPECT_FALSE(LaunchOverrideFromJson(nlohmann::json{{"cache_preference", "big"}}).ok());
  EXPECT_FALSE(LaunchOverrideFromJson(nlohmann::json::array()).ok());
}

}  // namespace
}  // namespace kerncap::replay
