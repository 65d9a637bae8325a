#include "reproducer/replay/core/report.h"

#include <cmath>
#include <limits>
#include <vector>

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

TEST(ReportTest, TheComparisonPathAndItsTimesAreReported) {
  ValidationReport r;
  RegionResult rr;
  rr.index = 0;
  rr.size = 1 << 20;
  rr.on_device = true;
  r.regions.push_back(rr);
  r.comparison.path = "mixed";
  r.comparison.requested = "auto";
  r.comparison.device_regions = 1;
  r.comparison.device_bytes = 1 << 20;
  r.comparison.host_regions = 1;
  r.comparison.host_bytes = 2 << 20;
  r.comparison.host_reason = "1 device region(s) compared on the host (region 1: too big)";
  r.comparison.expectation_seconds = 0.25;
  r.comparison.compare_seconds = 0.5;
  r.validate_seconds = 2;
  const nlohmann::json j = ValidationJson(r);
  EXPECT_EQ(j["comparison"]["path"], "mixed");
  EXPECT_EQ(j["comparison"]["host_reason"], r.comparison.host_reason);
  EXPECT_EQ(j["comparison"]["expectation_seconds"], 0.25);
  EXPECT_EQ(j["validate_seconds"], 2.0);
  EXPECT_EQ(j["region_results"][0]["compared_on"], "device");
  const std::string text = FormatValidation(r);
  EXPECT_TRUE(absl::StrContains(text, "1 region(s), 1.0 MiB on the GPU")) << text;
  EXPECT_TRUE(absl::StrContains(text, "2.0 MiB on the host (1 device region(s)")) << text;
  EXPECT_TRUE(absl::StrContains(text, "compare: path mixed, 0.500 s")) << text;
  EXPECT_TRUE(absl::StrContains(text, "validate: 2.000 s")) << text;
  // Without a host part, no reason is printed; without timing, no total.
  r.comparison = ComparisonInfo{};
  r.comparison.path = "device";
  r.comparison.device_regions = 1;
  r.validate_seconds = 0;
  const std::string device_only = FormatValidation(r);
  EXPECT_FALSE(absl::StrContains(device_only, "device region(s), ")) << device_only;
  EXPECT_FALSE(absl::StrContains(device_only, "validate: ")) << device_only;
  EXPECT_FALSE(ValidationJson(r)["comparison"].contains("host_reason"));
}

TEST(ReportTest, RelocationIsSaidLoudly) {
  ValidationReport r = SampleReport();
  r.info.relocated = true;
  r.info.moved = {MovedRegion{0, "device", 0x7f0000000000, 1 << 30, 0x302000000, 12}};
  r.info.patched_words = 12;
  const std::string text = FormatValidation(r);
  EXPECT_TRUE(absl::StrContains(text, "RELOCATED REPLAY: 1 region(s)")) << text;
  EXPECT_TRUE(absl::StrContains(
      text, "device region 0 0x7f0000000000 +1073741824 -> 0x302000000: 12 pointer word(s) into "
            "it patched"))
      << text;
  nlohmann::json j = ValidationJson(r);
  EXPECT_EQ(j["relocated"], true);
  EXPECT_EQ(j["relocation"], "relocated");
  EXPECT_EQ(j["moved_ranges"][0]["new_va"], "0x302000000");
  EXPECT_EQ(j["moved_ranges"][0]["old_va"], "0x7f0000000000");
  EXPECT_EQ(j["moved_ranges"][0]["kind"], "device");
  EXPECT_EQ(j["moved_ranges"][0]["region"], 0);
  EXPECT_EQ(j["moved_ranges"][0]["pointers_patched"], 12);
  EXPECT_EQ(j["patched_pointer_words"], 12);
}

TEST(ReportTest, RecreatedTextureObjectsAreListed) {
  ValidationReport r = SampleReport();
  EXPECT_EQ(ValidationJson(r)["texture_objects"], nlohmann::json::array());
  ReplayedTextureObject t;
  t.captured_handle = 0x5;
  t.replay_handle = 0x101;
  t.resource = "pitch2d";
  t.captured_ptr = 0x7f0000001000;
  t.replay_ptr = 0x302001000;
  t.bytes = 10224;
  t.argument_offsets = {8};
  r.info.texture_objects.push_back(t);
  nlohmann::json j = ValidationJson(r);
  ASSERT_EQ(j["texture_objects"].size(), 1u);
  const nlohmann::json& o = j["texture_objects"][0];
  EXPECT_EQ(o["type"], "texture");
  EXPECT_EQ(o["captured_handle"], "0x5");
  EXPECT_EQ(o["replay_handle"], "0x101");
  EXPECT_EQ(o["resource"], "pitch2d");
  EXPECT_EQ(o["replay_ptr"], "0x302001000");
  EXPECT_EQ(o["bytes"], 10224);
  EXPECT_EQ(o["argument_offsets"], nlohmann::json::array({8}));
  EXPECT_TRUE(absl::StrContains(FormatValidation(r),
                                "texture object 0x5 recreated as 0x101 over pitch2d 0x302001000+10224"));
}

// A small pinned host block that moved, with no pointer into it: a note.
// The same block with a pointer into it, a large one, or any device range:
// the alarm, with what moved and where the pointers went.
TEST(ReportTest, SmallUnreferencedHostBlocksAreANoteNotAnAlarm) {
  ValidationReport r = SampleReport();
  r.info.relocated = true;
  r.info.moved = {MovedRegion{4, "host_pinned", 0x7f3c00001000, 256, 0x55d000001000, 0}};
  EXPECT_EQ(r.info.relocation(), RelocationSeverity::kNote);
  std::string text = FormatValidation(r);
  EXPECT_FALSE(absl::StrContains(text, "RELOCATED REPLAY")) << text;
  EXPECT_TRUE(absl::StrContains(text, "note: 1 small pinned host block(s)")) << text;
  EXPECT_TRUE(absl::StrContains(
      text, "host_pinned region 4 0x7f3c00001000 +256 -> 0x55d000001000: no pointer to it found"))
      << text;
  nlohmann::json j = ValidationJson(r);
  EXPECT_EQ(j["relocated"], true);  // the fact stays in the JSON
  EXPECT_EQ(j["relocation"], "note");
  EXPECT_EQ(j["moved_ranges"][0]["pointers_patched"], 0);

  r.info.moved[0].pointers_patched = 1;
  EXPECT_EQ(r.info.relocation(), RelocationSeverity::kRelocated);
  EXPECT_TRUE(absl::StrContains(FormatValidation(r), "RELOCATED REPLAY"));
  r.info.moved[0].pointers_patched = 0;
  r.info.moved[0].size = kSmallHostBlockBytes + 1;
  EXPECT_EQ(r.info.relocation(), RelocationSeverity::kRelocated);
  r.info.moved[0].size = 256;
  r.info.moved.push_back(MovedRegion{1, "device", 0x7f0000000000, 4096, 0x302000000, 0});
  EXPECT_EQ(r.info.relocation(), RelocationSeverity::kRelocated);
  EXPECT_EQ(ClassifyRelocation({}), RelocationSeverity::kNone);
}

// A module variable that was not compared makes the verdict "incomplete",
// never "pass", and names it; a failing region still makes it "fail".
TEST(ReportTest, StateLeftOutOfTheComparisonIsInTheVerdict) {
  ValidationReport r = SampleReport();
  r.regions[1].passed = true;
  r.regions[1].stats = CompareStats{};
  ASSERT_TRUE(r.passed());
  EXPECT_STREQ(r.verdict(), "pass");
  r.not_compared.push_back(NotCompared{3, false, 0x7f3d00000400, "module_global",
                                       "_ZN30_INTERNAL_bd0d3510_4_k_cu_kern7counterE", 4,
                                       "not in the loaded code object"});
  EXPECT_FALSE(r.passed());
  EXPECT_STREQ(r.verdict(), "incomplete");
  nlohmann::json j = ValidationJson(r);
  EXPECT_EQ(j["result"], "incomplete");
  EXPECT_EQ(j["regions_not_compared"], 1);
  EXPECT_EQ(j["not_compared"][0]["name"], "_ZN30_INTERNAL_bd0d3510_4_k_cu_kern7counterE");
  EXPECT_EQ(j["not_compared"][0]["reason"], "not in the loaded code object");
  EXPECT_EQ(j["not_compared"][0]["va"], "0x7f3d00000400");
  const std::string text = FormatValidation(r);
  EXPECT_TRUE(absl::StrContains(text, "NOT COMPARED captured region 3 0x7f3d00000400 "
                                      "module_global _ZN30_INTERNAL_bd0d3510_4_k_cu_kern7counterE"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "INCOMPLETE: 2 regions compared, 0 differ, 1 not compared"))
      << text;
  EXPECT_FALSE(absl::StrContains(text, "PASS")) << text;
  nlohmann::json v = VerdictJson(r);
  EXPECT_EQ(v["result"], "incomplete");
  EXPECT_EQ(v["not_compared"].size(), 1u);

  ValidationReport failing = SampleReport();
  failing.not_compared = r.not_compared;
  EXPECT_STREQ(failing.verdict(), "fail");
  EXPECT_EQ(VerdictJson(failing)["failing"][0]["name"], "d_sum");
  EXPECT_TRUE(absl::StrContains(FormatValidation(failing), "FAIL: 2 regions compared, 1 differ, 1 "
                                                           "not compared"));
  // Nothing compared at all is not a pass either.
  ValidationReport empty;
  EXPECT_STREQ(empty.verdict(), "incomplete");
  EXPECT_TRUE(absl::StrContains(FormatValidation(empty), "(nothing was compared)"));
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
  // Percentiles of the samples; no verdicts without a validation.
  EXPECT_EQ(j["p10_ms"], Percentile(b.samples_ms, 10));
  EXPECT_EQ(j["p90_ms"], Percentile(b.samples_ms, 90));
  EXPECT_TRUE(j["validated"]["kernel"].is_null());
  EXPECT_TRUE(j["revalidated"]["kernel"].is_null());
  EXPECT_EQ(j["verdicts_pass"], true);
}

// The post-timing verdict is in the JSON and the text; a binary that passed
// before the timing and fails after it is not reported as fine.
TEST(ReportTest, BenchVerdictsBeforeAndAfterTiming) {
  BenchReport b;
  b.samples_ms = {1.0};
  b.stats = ComputeBenchStats(b.samples_ms);
  ValidationReport good = SampleReport();
  good.regions[1].passed = true;
  b.kernel_before = good;
  b.kernel_after = SampleReport();  // region 1 (d_sum) fails
  b.persisting_l2.limit_before = 1 << 20;
  b.persisting_l2.lines_reset = true;
  b.protocol = "restore written regions; start event; launch; stop event";
  RegionResult changed;
  changed.index = 5;
  changed.va = 0x7f0000400000;
  changed.kind = "device";
  changed.stats.bytes_differing = 8;
  b.changed_during_timing.push_back(changed);
  EXPECT_FALSE(b.verdicts_pass());
  nlohmann::json j = BenchJson(b, false);
  EXPECT_EQ(j["validated"]["kernel"], "pass");
  EXPECT_EQ(j["revalidated"]["kernel"], "fail");
  EXPECT_EQ(j["validation"]["kernel"]["after"]["failing"][0]["name"], "d_sum");
  EXPECT_EQ(j["validation"]["changed_during_timing"][0]["index"], 5);
  EXPECT_EQ(j["verdicts_pass"], false);
  EXPECT_EQ(j["persisting_l2"]["limit_before_bytes"], 1 << 20);
  EXPECT_EQ(j["persisting_l2"]["limit_during_bytes"], 0);
  EXPECT_EQ(j["protocol"], b.protocol);
  const std::string t = FormatBench(b);
  EXPECT_TRUE(absl::StrContains(t, "kernel before timing: PASS; after timing: FAIL (region 1 "
                                   "0x7f0000200000 module_global d_sum differs)"))
      << t;
  EXPECT_TRUE(absl::StrContains(t, "CHANGED DURING TIMING: region 5 0x7f0000400000 device")) << t;
  EXPECT_TRUE(absl::StrContains(t, "a previous user had set aside 1048576 bytes, reset to 0")) << t;
  EXPECT_TRUE(absl::StrContains(t, "WARNING: a timed binary does not validate")) << t;
}

TEST(SpeedupTest, PercentileInterpolates) {
  EXPECT_EQ(Percentile({}, 50), 0.0);
  EXPECT_EQ(Percentile({3.0}, 10), 3.0);
  EXPECT_DOUBLE_EQ(Percentile({4.0, 1.0, 3.0, 2.0}, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile({1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0}, 10), 2.0);
  EXPECT_DOUBLE_EQ(Percentile({1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0}, 90), 10.0);
  EXPECT_DOUBLE_EQ(Percentile({1.0, 2.0}, 90), 1.9);
  EXPECT_EQ(Percentile({1.0, 2.0}, 0), 1.0);
  EXPECT_EQ(Percentile({1.0, 2.0}, 100), 2.0);
}

TEST(SpeedupTest, RatioOfMediansAndPerPairSpread) {
  // Original 2 ms, variant 1 ms, with one disturbed pair each way.
  std::vector<double> orig = {2.0, 2.0, 2.0, 4.0, 2.0};
  std::vector<double> var = {1.0, 1.0, 2.0, 1.0, 1.0};
  SpeedupStats s = ComputeSpeedup(orig, var);
  EXPECT_EQ(s.pairs, 5u);
  EXPECT_DOUBLE_EQ(s.speedup, 2.0);  // median 2 / median 1
  EXPECT_DOUBLE_EQ(s.pair_median, 2.0);
  EXPECT_DOUBLE_EQ(s.pair_min, 1.0);
  EXPECT_DOUBLE_EQ(s.pair_max, 4.0);
  // Ratios sorted: 1 2 2 2 4 -> p10 at rank 0.4, p90 at rank 3.6.
  EXPECT_DOUBLE_EQ(s.pair_p10, 1.4);
  EXPECT_DOUBLE_EQ(s.pair_p90, 3.2);
  // A slower variant: speedup below 1.
  SpeedupStats slow = ComputeSpeedup({1.0, 1.0, 1.0}, {4.0, 5.0, 3.0});
  EXPECT_DOUBLE_EQ(slow.speedup, 0.25);
  EXPECT_DOUBLE_EQ(slow.pair_max, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(slow.pair_min, 0.2);
}

TEST(SpeedupTest, EdgeCases) {
  EXPECT_EQ(ComputeSpeedup({}, {1.0}).pairs, 0u);
  EXPECT_EQ(ComputeSpeedup({}, {1.0}).speedup, 0.0);
  // Unequal lengths pair up to the shorter; zero variant times give no ratio.
  SpeedupStats s = ComputeSpeedup({2.0, 2.0, 2.0}, {1.0, 0.0});
  EXPECT_EQ(s.pairs, 1u);
  EXPECT_DOUBLE_EQ(s.pair_median, 2.0);
  EXPECT_DOUBLE_EQ(s.speedup, 4.0);  // median 2 / median 0.5
  SpeedupStats inf = ComputeSpeedup({1.0}, {0.0});
  EXPECT_TRUE(std::isinf(inf.speedup));
  EXPECT_EQ(inf.pairs, 0u);
}

BenchReport ComparedReport(std::vector<double> variant, std::vector<double> original) {
  BenchReport b;
  b.warmup = 2;
  b.restore_each = true;
  b.samples_ms = std::move(variant);
  b.stats = ComputeBenchStats(b.samples_ms);
  b.compared = true;
  b.comparison.variant = "build/kernel.cubin";
  b.comparison.original = "code/kernel.cubin";
  b.comparison.order = "ABBA";
  b.comparison.original_samples_ms = std::move(original);
  b.comparison.original_stats = ComputeBenchStats(b.comparison.original_samples_ms);
  b.comparison.speedup = ComputeSpeedup(b.comparison.original_samples_ms, b.samples_ms);
  return b;
}

TEST(ReportTest, BenchComparisonJson) {
  BenchReport b = ComparedReport({1.0, 1.0, 1.0, 1.0}, {2.0, 2.0, 3.0, 2.0});
  nlohmann::json j = BenchJson(b, /*include_samples=*/true);
  EXPECT_EQ(j["compare_original"], true);
  EXPECT_EQ(j["median_ms"], 1.0);  // the top level stays the code object under test
  EXPECT_EQ(j["variant"]["code_object"], "build/kernel.cubin");
  EXPECT_EQ(j["variant"]["median_ms"], 1.0);
  EXPECT_EQ(j["original"]["code_object"], "code/kernel.cubin");
  EXPECT_EQ(j["original"]["median_ms"], 2.0);
  EXPECT_EQ(j["original"]["max_ms"], 3.0);
  EXPECT_EQ(j["original"]["iterations"], 4);
  EXPECT_EQ(j["original"]["samples_ms"].size(), 4u);
  EXPECT_EQ(j["interleave"], "ABBA");
  EXPECT_EQ(j["speedup"], 2.0);
  EXPECT_EQ(j["speedup_pairs"]["pairs"], 4);
  EXPECT_EQ(j["speedup_pairs"]["median"], 2.0);
  EXPECT_EQ(j["speedup_pairs"]["min"], 2.0);
  EXPECT_EQ(j["speedup_pairs"]["max"], 3.0);
  EXPECT_TRUE(j["speedup_pairs"].contains("p10"));
  EXPECT_TRUE(j["speedup_pairs"].contains("p90"));
  EXPECT_FALSE(BenchJson(b, false)["original"].contains("samples_ms"));
  EXPECT_NO_THROW(nlohmann::json::parse(j.dump()));
  // Infinity (a variant median of 0) stays valid JSON.
  BenchReport z = ComparedReport({0.0}, {1.0});
  EXPECT_EQ(BenchJson(z, false)["speedup"], "inf");
  // Without a comparison: the flag, none of the comparison keys.
  BenchReport plain;
  plain.samples_ms = {1.0};
  plain.stats = ComputeBenchStats(plain.samples_ms);
  nlohmann::json pj = BenchJson(plain, false);
  EXPECT_EQ(pj["compare_original"], false);
  EXPECT_FALSE(pj.contains("speedup"));
  EXPECT_FALSE(pj.contains("original"));
}

TEST(ReportTest, BenchComparisonText) {
  std::string t = FormatBench(ComparedReport({1.0, 1.0, 1.0, 1.0}, {2.0, 2.0, 3.0, 2.0}));
  EXPECT_TRUE(absl::StrContains(t, "4 iterations of each binary")) << t;
  EXPECT_TRUE(absl::StrContains(t, "interleaved ABBA")) << t;
  EXPECT_TRUE(absl::StrContains(t, "variant  build/kernel.cubin")) << t;
  EXPECT_TRUE(absl::StrContains(t, "original code/kernel.cubin (captured)")) << t;
  EXPECT_TRUE(absl::StrContains(t, "median 2.0000 ms")) << t;  // the original's
  EXPECT_TRUE(absl::StrContains(t, "speedup 2.000x")) << t;
  EXPECT_TRUE(absl::StrContains(t, "per pair (4 pairs): median 2.000x")) << t;
  EXPECT_TRUE(absl::StrContains(t, "the variant is faster")) << t;
  std::string slow = FormatBench(ComparedReport({2.0, 2.0, 2.0}, {1.0, 1.0, 1.0}));
  EXPECT_TRUE(absl::StrContains(slow, "speedup 0.500x")) << slow;
  EXPECT_TRUE(absl::StrContains(slow, "the variant is slower")) << slow;
  std::string same = FormatBench(ComparedReport({1.0, 1.1, 0.9}, {1.0, 1.0, 1.0}));
  EXPECT_TRUE(absl::StrContains(same, "no clear difference")) << same;
  BenchReport cap = ComparedReport({1.0}, {1.0});
  cap.comparison.variant.clear();
  EXPECT_TRUE(absl::StrContains(FormatBench(cap), "variant  (captured code object)"));
}

}  // namespace
}  // namespace kerncap::replay
