#include "reproducer/replay/report.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kerncap::replay {

std::string Hex(uint64_t v) { return absl::StrFormat("0x%x", v); }

bool ValidationReport::passed() const { return failing() == 0; }

size_t ValidationReport::failing() const {
  return static_cast<size_t>(std::count_if(regions.begin(), regions.end(),
                                           [](const RegionResult& r) { return !r.passed; }));
}

BenchStats ComputeBenchStats(std::vector<double> s) {
  BenchStats b;
  if (s.empty()) return b;
  std::sort(s.begin(), s.end());
  b.iterations = s.size();
  b.min_ms = s.front();
  b.max_ms = s.back();
  const size_t n = s.size();
  b.median_ms = n % 2 == 1 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  double sum = 0;
  for (double v : s) sum += v;
  b.mean_ms = sum / static_cast<double>(n);
  if (n > 1) {
    double sq = 0;
    for (double v : s) sq += (v - b.mean_ms) * (v - b.mean_ms);
    b.stddev_ms = std::sqrt(sq / static_cast<double>(n - 1));
  }
  return b;
}

double Percentile(std::vector<double> s, double p) {
  if (s.empty()) return 0;
  std::sort(s.begin(), s.end());
  const double pos = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(s.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (pos - static_cast<double>(lo)) * (s[hi] - s[lo]);
}

SpeedupStats ComputeSpeedup(const std::vector<double>& original_ms,
                            const std::vector<double>& variant_ms) {
  SpeedupStats r;
  const BenchStats o = ComputeBenchStats(original_ms);
  const BenchStats v = ComputeBenchStats(variant_ms);
  if (o.iterations == 0 || v.iterations == 0) return r;
  r.speedup = v.median_ms > 0 ? o.median_ms / v.median_ms
                              : std::numeric_limits<double>::infinity();
  std::vector<double> ratios;
  for (size_t k = 0; k < std::min(original_ms.size(), variant_ms.size()); ++k) {
    if (variant_ms[k] > 0) ratios.push_back(original_ms[k] / variant_ms[k]);
  }
  r.pairs = ratios.size();
  if (ratios.empty()) return r;
  const BenchStats rs = ComputeBenchStats(ratios);
  r.pair_median = rs.median_ms;
  r.pair_min = rs.min_ms;
  r.pair_max = rs.max_ms;
  r.pair_p10 = Percentile(ratios, 10);
  r.pair_p90 = Percentile(ratios, 90);
  return r;
}

namespace {

nlohmann::json StatsJson(const BenchStats& s) {
  return {{"iterations", s.iterations}, {"min_ms", s.min_ms},       {"median_ms", s.median_ms},
          {"max_ms", s.max_ms},         {"mean_ms", s.mean_ms},     {"stddev_ms", s.stddev_ms}};
}

// JSON has no infinity: report it as a string.
nlohmann::json Num(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  return v;
}

}  // namespace

nlohmann::json ReplayInfoJson(const ReplayInfo& info) {
  nlohmann::json moved = nlohmann::json::array();
  for (const MovedRange& m : info.moved) {
    moved.push_back({{"old_va", Hex(m.old_va)}, {"new_va", Hex(m.new_va)}, {"size", m.size}});
  }
  nlohmann::json textures = nlohmann::json::array();
  for (const ReplayedTextureObject& t : info.texture_objects) {
    textures.push_back({{"type", t.surface ? "surface" : "texture"},
                        {"captured_handle", Hex(t.captured_handle)},
                        {"replay_handle", Hex(t.replay_handle)},
                        {"resource", t.resource},
                        {"captured_ptr", Hex(t.captured_ptr)},
                        {"replay_ptr", Hex(t.replay_ptr)},
                        {"bytes", t.bytes},
                        {"argument_offsets", t.argument_offsets}});
  }
  return {{"capture_id", info.capture_id},
          {"kernel", info.kernel},
          {"device", info.device},
          {"relocated", info.relocated},
          {"moved_ranges", moved},
          {"patched_pointer_words", info.patched_words},
          {"regions", info.regions},
          {"restored_bytes", info.restored_bytes},
          {"reservations", info.reservations},
          {"restore_seconds", info.restore_seconds},
          {"restore_gbps", info.restore_seconds > 0
                               ? static_cast<double>(info.restored_bytes) / info.restore_seconds / 1e9
                               : 0.0},
          {"upload_bytes", info.upload_bytes},
          {"upload_seconds", info.upload_seconds},
          {"upload_gbps", info.upload_seconds > 0
                              ? static_cast<double>(info.upload_bytes) / info.upload_seconds / 1e9
                              : 0.0},
          {"upload_workers", info.upload_workers},
          {"init_seconds", info.init_seconds},
          {"reserve_seconds", info.reserve_seconds},
          {"map_seconds", info.map_seconds},
          {"map_wait_seconds", info.map_wait_seconds},
          {"staging_seconds", info.staging_seconds},
          {"code_seconds", info.code_seconds},
          {"launch_ms", info.launch_ms},
          {"texture_objects", textures},
          {"warnings", info.warnings}};
}

nlohmann::json ValidationJson(const ValidationReport& report) {
  nlohmann::json j = ReplayInfoJson(report.info);
  j["command"] = "validate";
  j["result"] = report.passed() ? "pass" : "fail";
  j["regions_compared"] = report.regions.size();
  j["regions_failing"] = report.failing();
  nlohmann::json regions = nlohmann::json::array();
  for (const RegionResult& r : report.regions) {
    const CompareStats& s = r.stats;
    nlohmann::json rj = {{"index", r.index},
                         {"va", Hex(r.va)},
                         {"replay_va", Hex(r.replay_va)},
                         {"kind", r.kind},
                         {"name", r.name},
                         {"size", r.size},
                         {"dtype", DTypeName(r.dtype)},
                         {"atol", r.tolerance.atol},
                         {"rtol", r.tolerance.rtol},
                         {"ulp", r.tolerance.ulp},
                         {"passed", r.passed},
                         {"bytes_differing", s.bytes_differing},
                         {"elements", s.elements_compared},
                         {"elements_differing", s.elements_differing},
                         {"elements_failing", s.elements_failing},
                         {"nan_mismatches", s.nan_mismatches},
                         {"max_abs_error", Num(s.max_abs_error)},
                         {"max_rel_error", Num(s.max_rel_error)},
                         {"max_ulp_error", s.max_ulp_error},
                         {"first_diff_offset", s.first_diff_offset},
                         {"first_fail_offset", s.first_fail_offset}};
    nlohmann::json samples = nlohmann::json::array();
    for (const Mismatch& m : s.samples) {
      samples.push_back({{"offset", m.offset}, {"expected", Num(m.expected)}, {"actual", Num(m.actual)}});
    }
    rj["samples"] = samples;
    regions.push_back(rj);
  }
  j["region_results"] = regions;
  return j;
}

nlohmann::json BenchJson(const BenchReport& report, bool include_samples) {
  nlohmann::json j = ReplayInfoJson(report.info);
  j["command"] = "bench";
  j["warmup"] = report.warmup;
  j["iterations"] = report.stats.iterations;
  j["cold_l2"] = report.cold_l2;
  j["restore_each"] = report.restore_each;
  j["restore_bytes_per_iteration"] = report.restore_bytes_per_iteration;
  j["min_ms"] = report.stats.min_ms;
  j["median_ms"] = report.stats.median_ms;
  j["max_ms"] = report.stats.max_ms;
  j["mean_ms"] = report.stats.mean_ms;
  j["stddev_ms"] = report.stats.stddev_ms;
  if (include_samples) j["samples_ms"] = report.samples_ms;
  j["compare_original"] = report.compared;
  if (report.compared) {
    const BenchComparison& c = report.comparison;
    nlohmann::json variant = StatsJson(report.stats);
    variant["code_object"] = c.variant;
    nlohmann::json original = StatsJson(c.original_stats);
    original["code_object"] = c.original;
    if (include_samples) original["samples_ms"] = c.original_samples_ms;
    j["variant"] = variant;
    j["original"] = original;
    j["interleave"] = c.order;
    j["speedup"] = Num(c.speedup.speedup);
    j["speedup_pairs"] = {{"pairs", c.speedup.pairs},
                          {"median", Num(c.speedup.pair_median)},
                          {"p10", Num(c.speedup.pair_p10)},
                          {"p90", Num(c.speedup.pair_p90)},
                          {"min", Num(c.speedup.pair_min)},
                          {"max", Num(c.speedup.pair_max)}};
  }
  return j;
}

std::string FormatReplayInfo(const ReplayInfo& info) {
  std::string out = absl::StrFormat("capture %s: %s on %s\n", info.capture_id, info.kernel,
                                    info.device);
  absl::StrAppendFormat(&out, "restored %u regions, %.1f MiB in %u reservations, %.3f s\n",
                        info.regions, info.restored_bytes / 1048576.0, info.reservations,
                        info.restore_seconds);
  if (info.upload_seconds > 0) {
    absl::StrAppendFormat(&out,
                          "  init %.3f s, reserve %.3f s, upload %.3f s (map %.3f s overlapped, "
                          "%.3f s waited; staging %.3f s), code %.3f s\n",
                          info.init_seconds, info.reserve_seconds, info.upload_seconds,
                          info.map_seconds, info.map_wait_seconds, info.staging_seconds,
                          info.code_seconds);
  }
  if (info.relocated) {
    absl::StrAppendFormat(&out,
                          "RELOCATED REPLAY: %u range(s) not at their original address; %u "
                          "pointer word(s) patched (heuristic)\n",
                          info.moved.size(), info.patched_words);
    for (const MovedRange& m : info.moved) {
      absl::StrAppendFormat(&out, "  %s +%u -> %s\n", Hex(m.old_va), m.size, Hex(m.new_va));
    }
  } else {
    out += "address space: every region at its original virtual address\n";
  }
  for (const ReplayedTextureObject& t : info.texture_objects) {
    absl::StrAppendFormat(&out, "%s object %s recreated as %s over %s %s+%u\n",
                          t.surface ? "surface" : "texture", Hex(t.captured_handle),
                          Hex(t.replay_handle), t.resource, Hex(t.replay_ptr), t.bytes);
  }
  for (const std::string& w : info.warnings) absl::StrAppend(&out, "warning: ", w, "\n");
  return out;
}

std::string FormatValidation(const ValidationReport& report) {
  std::string out = FormatReplayInfo(report.info);
  absl::StrAppendFormat(&out, "launch: %.3f ms\n", report.info.launch_ms);
  for (const RegionResult& r : report.regions) {
    if (r.passed && r.stats.elements_differing == 0) continue;
    const CompareStats& s = r.stats;
    absl::StrAppendFormat(&out, "%s region %u %s %s%s%s (%u bytes, %s): ",
                          r.passed ? "within tolerance" : "DIFFERS", r.index, Hex(r.va), r.kind,
                          r.name.empty() ? "" : " ", r.name, r.size, DTypeName(r.dtype));
    absl::StrAppendFormat(&out,
                          "%u bytes differ, %u of %u elements differ (%u outside tolerance), "
                          "worst abs %g rel %g ulp %u, first difference at offset %d\n",
                          s.bytes_differing, s.elements_differing, s.elements_compared,
                          s.elements_failing, s.max_abs_error, s.max_rel_error, s.max_ulp_error,
                          s.first_diff_offset);
    for (const Mismatch& m : s.samples) {
      absl::StrAppendFormat(&out, "    at +%u: expected %.9g got %.9g\n", m.offset, m.expected,
                            m.actual);
    }
  }
  absl::StrAppendFormat(&out, "%s: %u regions compared, %u differ\n",
                        report.passed() ? "PASS" : "FAIL", report.regions.size(),
                        report.failing());
  return out;
}

std::string FormatBench(const BenchReport& r) {
  std::string out = FormatReplayInfo(r.info);
  absl::StrAppendFormat(&out, "bench: %d warm-up, %u iterations%s%s%s\n", r.warmup,
                        r.stats.iterations, r.compared ? " of each binary" : "",
                        r.cold_l2 ? ", cold L2" : "",
                        r.restore_each ? ", written regions restored before each launch" : "");
  auto line = [&out](const BenchStats& s) {
    absl::StrAppendFormat(
        &out, "min %.4f ms  median %.4f ms  max %.4f ms  mean %.4f ms  stddev %.4f ms\n",
        s.min_ms, s.median_ms, s.max_ms, s.mean_ms, s.stddev_ms);
  };
  if (!r.compared) {
    line(r.stats);
    return out;
  }
  const BenchComparison& c = r.comparison;
  const SpeedupStats& sp = c.speedup;
  absl::StrAppendFormat(&out, "interleaved %s (A = variant, B = original), same restore%s before "
                        "every launch\n", c.order, r.cold_l2 ? " and L2 flush" : "");
  absl::StrAppendFormat(&out, "variant  %s:\n  ", c.variant.empty() ? "(captured code object)"
                                                                   : c.variant);
  line(r.stats);
  absl::StrAppendFormat(&out, "original %s (captured):\n  ", c.original);
  line(c.original_stats);
  absl::StrAppendFormat(&out,
                        "speedup %.3fx (original median / variant median; > 1: the variant is "
                        "faster)\n",
                        sp.speedup);
  absl::StrAppendFormat(&out,
                        "  per pair (%u pairs): median %.3fx, p10..p90 %.3fx..%.3fx, "
                        "min..max %.3fx..%.3fx\n",
                        sp.pairs, sp.pair_median, sp.pair_p10, sp.pair_p90, sp.pair_min,
                        sp.pair_max);
  if (sp.pairs > 0 && sp.pair_p10 <= 1.0 && sp.pair_p90 >= 1.0) {
    out += "  the p10..p90 band spans 1.0: no clear difference\n";
  } else if (sp.pairs > 0) {
    out += sp.speedup > 1 ? "  the variant is faster\n" : "  the variant is slower\n";
  }
  return out;
}

}  // namespace kerncap::replay
