#include "reproducer/replay/report.h"

#include <limits>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace kerncap::replay {
namespace {

TEST(BenchStatsTest, MinMedianMaxMeanStddev) {
  BenchStats s = ComputeBenchStats({4.0, 1.0, 3.0, 2.0});
  EXPECT_EQ(s.iterations, 4u);
  EXPECT_EQ(s.min_ms, 1.0);
  EXPECT_EQ(s.max_ms, 4.0);
  EXPECT_EQ(s.median_ms, 2.5);
  EXPECT_EQ(s.mean_ms, 2.5);
  EXPECT_NEAR(s.stddev_ms, 1.2909944, 1e-6);
  BenchStats odd = ComputeBenchStats({5.0, 1.0, 2.0});
  EXPECT_EQ(odd.median_ms, 2.0);
  EXPECT_EQ(ComputeBenchStats({}).iterations, 0u);
  EXPECT_EQ(ComputeBenchStats({7.0}).stddev_ms, 0.0);
}

ValidationReport SampleReport() {
  ValidationReport r;
  r.info.capture_id = "cap-1234";
  r.info.kernel = "scale(float*, float, int)";
  r.info.device = "0: NVIDIA H200 (sm_90)";
  RegionResult ok;
  ok.index = 0;
  ok.va = 0x7f0000000000;
  ok.replay_va = ok.va;
  ok.kind = "device";
  ok.size = 4096;
  RegionResult bad;
  bad.index = 1;
  bad.va = 0x7f0000200000;
  bad.replay_va = bad.va;
  bad.kind = "module_global";
  bad.name = "d_sum";
  bad.size = 16;
  bad.dtype = DType::kF32;
  bad.passed = false;
  bad.stats.bytes_differing = 3;
  bad.stats.elements_differing = 1;
  bad.stats.elements_failing = 1;
  bad.stats.elements_compared = 4;
  bad.stats.first_diff_offset = 8;
  bad.stats.max_abs_error = std::numeric_limits<double>::infinity();
  bad.stats.samples.push_back(Mismatch{8, 1.0, 2.0});
  r.regions = {ok, bad};
  return r;
}

TEST(ReportTest, ValidationJsonNamesTheFailingRegion) {
  ValidationReport r = SampleReport();
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.failing(), 1u);
  nlohmann::json j = ValidationJson(r);
  EXPECT_EQ(j["result"], "fail");
  EXPECT_EQ(j["regions_failing"], 1);
  EXPECT_EQ(j["relocated"], false);
  EXPECT_EQ(j["region_results"][1]["va"], "0x7f0000200000");
  EXPECT_EQ(j["region_results"][1]["name"], "d_sum");
  EXPECT_EQ(j["region_results"][1]["dtype"], "f32");
  EXPECT_EQ(j["region_results"][1]["max_abs_error"], "inf");  // JSON has no infinity
  EXPECT_EQ(j["region_results"][1]["first_diff_offset"], 8);
  EXPECT_EQ(j["region_results"][1]["samples"][0]["actual"], 2.0);
  // Parses back (valid JSON).
  EXPECT_NO_THROW(nlohmann::json::parse(j.dump()));
}

TEST(ReportTest, TextReportListsOnlyDifferingRegionsAndVerdict) {
  std::string text = FormatValidation(SampleReport());
  EXPECT_TRUE(absl::StrContains(text, "DIFFERS region 1 0x7f0000200000 module_global d_sum"));
  EXPECT_FALSE(absl::StrContains(text, "region 0 "));
  EXPECT_TRUE(absl::StrContains(text, "FAIL: 2 regions compared, 1 differ"));
  EXPECT_TRUE(absl::StrContains(text, "every region at its original virtual address"));
}

TEST(ReportTest, RelocationIsSaidLoudly) {
  ValidationReport r = SampleReport();
  r.info.relocated = true;
  r.info.moved = {MovedRange{0x7f0000000000, 1 << 30, 0x302000000}};
  r.info.patched_words = 12;
  EXPECT_TRUE(absl::StrContains(FormatValidation(r), "RELOCATED REPLAY"));
  nlohmann::json j = ValidationJson(r);
  EXPECT_EQ(j["relocated"], true);
  EXPECT_EQ(j["moved_ranges"][0]["new_va"], "0x302000000");
  EXPECT_EQ(j["patched_pointer_words"], 12);
}

TEST(ReportTest, RestorePhaseTimesAreReported) {
  ValidationReport r = SampleReport();
  r.info.restored_bytes = 8ull << 30;
  r.info.restore_seconds = 0.4;
  r.info.upload_bytes = 8ull << 30;
  r.info.upload_seconds = 0.3;
  r.info.map_seconds = 0.25;
  r.info.map_wait_seconds = 0.01;
  r.info.staging_seconds = 0.02;
  r.info.init_seconds = 0.05;
  r.info.reserve_seconds = 0.03;
  r.info.code_seconds = 0.02;
  nlohmann::json j = ValidationJson(r);
  EXPECT_EQ(j["restore_seconds"], 0.4);
  EXPECT_EQ(j["upload_seconds"], 0.3);
  EXPECT_EQ(j["map_seconds"], 0.25);
  EXPECT_EQ(j["map_wait_seconds"], 0.01);
  EXPECT_EQ(j["staging_seconds"], 0.02);
  EXPECT_EQ(j["init_seconds"], 0.05);
  EXPECT_EQ(j["reserve_seconds"], 0.03);
  EXPECT_EQ(j["code_seconds"], 0.02);
  EXPECT_TRUE(j.contains("upload_gbps"));
  EXPECT_TRUE(absl::StrContains(FormatValidation(r), "map 0.250 s overlapped"));
}

TEST(ReportTest, BenchJsonAndText) {
  BenchReport b;
  b.warmup = 3;
  b.cold_l2 = true;
  b.restore_each = true;
  b.samples_ms = {1.0, 2.0, 3.0};
  b.stats = ComputeBenchStats(b.samples_ms);
  nlohmann::json j = BenchJson(b, /*include_samples=*/true);
  EXPECT_EQ(j["command"], "bench");
  EXPECT_EQ(j["median_ms"], 2.0);
  EXPECT_EQ(j["iterations"], 3);
  EXPECT_EQ(j["samples_ms"].size(), 3u);
  EXPECT_FALSE(BenchJson(b, false).contains("samples_ms"));
  std::string t = FormatBench(b);
  EXPECT_TRUE(absl::StrContains(t, "cold L2"));
  EXPECT_TRUE(absl::StrContains(t, "median 2.0000 ms"));
}

}  // namespace
}  // namespace kerncap::replay
