// Per-shape arms end to end on CPU: a real kerncapd, the real kerncapctl
// (arm --per-shape, arms, show) and the synthetic agent launching one kernel
// with a few launch shapes and scalar arguments, its buffer pointers moving
// between dispatches (which must not make new shapes).
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/local_daemon.h"
#include "tests/integration/subprocess.h"

namespace kerncap::testing {
namespace {

class PerShapeE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("kc_per_shape");
    daemon_ = std::make_unique<LocalDaemon>(dir_);
    ASSERT_TRUE(daemon_->up()) << "kerncapd did not come up:\n" << daemon_->Stderr();
  }
  void TearDown() override {
    if (daemon_) daemon_->Stop(15);
    RemoveTree(dir_);
  }
  RunResult Ctl(std::vector<std::string> args) const { return daemon_->Ctl(std::move(args)); }
  // 24 dispatches of gemm: grid (i % 2) + 1, scalar i % 3 (6 combinations).
  RunResult RunAgent() const {
    return RunProcess({BinaryPath("synthetic_agent"), "--socket=" + dir_ + "/agent.sock",
                       "--kernels=gemm", "--dispatches=24", "--shapes=2", "--scalar-shapes=3",
                       "--region-mib=0.25", "--wait-arm-ms=5000"},
                      std::chrono::seconds(60));
  }
  nlohmann::json Arm(const std::string& id) const {
    RunResult r = Ctl({"-o", "json", "arms", "--all"});
    nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
    if (doc.is_discarded()) return {};
    for (const nlohmann::json& a : doc["arms"]) {
      if (a["arm_id"] == id) return a;
    }
    return {};
  }
  // The launch_shape of every capture the arm took (from `show`).
  std::vector<std::string> ShapesOf(const nlohmann::json& arm) const {
    std::vector<std::string> shapes;
    for (const nlohmann::json& id : arm.value("capture_ids", nlohmann::json::array())) {
      RunResult r = Ctl({"-o", "json", "show", id.get<std::string>()});
      nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
      EXPECT_FALSE(doc.is_discarded()) << r.out << r.err;
      if (doc.is_discarded()) continue;
      shapes.push_back(doc["manifest"].value("launch_shape", ""));
    }
    return shapes;
  }

  std::string dir_;
  std::unique_ptr<LocalDaemon> daemon_;
};

TEST_F(PerShapeE2eTest, ScalarsModeTakesEachCombinationOnceAndLaunchModeEachGrid) {
  RunResult r = Ctl({"-q", "arm", "--kernel=gemm", "--per-shape", "--count=10", "--ttl=5m"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string scalars_arm(absl::StripAsciiWhitespace(r.out));
  RunResult agent = RunAgent();
  ASSERT_EQ(agent.exit_code, 0) << agent.out << agent.err;
  nlohmann::json arm = Arm(scalars_arm);
  ASSERT_FALSE(arm.is_null()) << scalars_arm;
  EXPECT_EQ(arm["captured"], 6) << arm.dump();  // (i%2, i%3): 6 shapes of 24 dispatches
  EXPECT_EQ(arm["state"], "active") << arm.dump();  // 6 of at most 10
  EXPECT_EQ(arm["selector"]["per_shape"], "scalars") << arm.dump();
  std::vector<std::string> shapes = ShapesOf(arm);
  ASSERT_EQ(shapes.size(), 6u);
  EXPECT_EQ(std::set<std::string>(shapes.begin(), shapes.end()).size(), 6u);
  for (const std::string& s : shapes) EXPECT_EQ(s.size(), 16u) << s;
  // The agent took the first dispatch of each shape: 0..5.
  std::vector<int> dispatches;
  for (absl::string_view line : absl::StrSplit(agent.out, '\n', absl::SkipEmpty())) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("capture_id")) dispatches.push_back(j["dispatch"]);
  }
  EXPECT_EQ(dispatches, (std::vector<int>{0, 1, 2, 3, 4, 5})) << agent.out;

  // A second process with the same shapes: kerncapd already has each of them.
  agent = RunAgent();
  ASSERT_EQ(agent.exit_code, 0) << agent.out << agent.err;
  EXPECT_TRUE(absl::StrContains(agent.out, "already has a capture of launch shape")) << agent.out;
  EXPECT_EQ(Arm(scalars_arm)["captured"], 6);
  ASSERT_EQ(Ctl({"disarm", scalars_arm}).exit_code, 0);

  // Launch configuration only: the two grids.
  r = Ctl({"arm", "--kernel=gemm", "--per-shape=launch", "--ttl=5m"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "per-shape=launch")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "count 16 (at most one per shape)")) << r.out;
  agent = RunAgent();
  ASSERT_EQ(agent.exit_code, 0) << agent.out << agent.err;
  r = Ctl({"-o", "json", "arms"});
  nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << r.out;
  ASSERT_EQ(doc["arms"].size(), 1u) << r.out;
  EXPECT_EQ(doc["arms"][0]["captured"], 2) << r.out;
  shapes = ShapesOf(doc["arms"][0]);
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_NE(shapes[0], shapes[1]);
  // `show` names the shape in its header.
  r = Ctl({"show", doc["arms"][0]["capture_ids"][0].get<std::string>()});
  EXPECT_TRUE(absl::StrContains(r.out, "shape " + shapes[0])) << r.out;
}

TEST_F(PerShapeE2eTest, BadPerShapeRequestsAreRefusedWithTheReason) {
  RunResult r = Ctl({"arm", "--kernel=gemm", "--per-shape=sometimes"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "--per-shape")) << r.err;
  r = Ctl({"arm", "--kernel=gemm", "--per-shape", "--nth=3"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "--nth")) << r.err;
  r = Ctl({"-o", "json", "arms"});
  EXPECT_TRUE(absl::StrContains(r.out, "\"arms\": []") || !absl::StrContains(r.out, "arm-"))
      << r.out;
}

}  // namespace
}  // namespace kerncap::testing
