#include "reproducer/replay/core/report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/json_policy.h"

namespace kerncap::replay {

std::string Hex(uint64_t v) { return json_policy::Address(v); }  // docs/JSON.md

RelocationSeverity ClassifyRelocation(const std::vector<MovedRegion>& moved) {
  if (moved.empty()) return RelocationSeverity::kNone;
  for (const MovedRegion& m : moved) {
    if (m.kind != "host_pinned" || m.size > kSmallHostBlockBytes || m.pointers_patched > 0) {
      return RelocationSeverity::kRelocated;
    }
  }
  return RelocationSeverity::kNote;
}

const char* RelocationSeverityName(RelocationSeverity s) {
  switch (s) {
    case RelocationSeverity::kNone: return "none";
    case RelocationSeverity::kNote: return "note";
    case RelocationSeverity::kRelocated: break;
  }
  return "relocated";
}

const char* ValidationReport::verdict() const {
  if (launch_shape_dependent) return "launch_shape_dependent";
  if (failing() > 0) return "fail";
  if (regions.empty() || !not_compared.empty()) return "incomplete";
  return "pass";
}

bool ValidationReport::passed() const { return std::string_view(verdict()) == "pass"; }

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
  b.p10_ms = Percentile(s, 10);
  b.p90_ms = Percentile(s, 90);
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

// JSON has no infinity: "inf", "-inf", "nan" (docs/JSON.md).
nlohmann::json Num(double v) { return json_policy::Number(v); }

}  // namespace

nlohmann::json BenchStatsJson(const BenchStats& s) {
  return {{"iterations", s.iterations}, {"min_ms", s.min_ms},       {"median_ms", s.median_ms},
          {"max_ms", s.max_ms},         {"mean_ms", s.mean_ms},     {"stddev_ms", s.stddev_ms},
          {"p10_ms", s.p10_ms},         {"p90_ms", s.p90_ms}};
}

nlohmann::json ReplayInfoJson(const ReplayInfo& info) {
  nlohmann::json moved = nlohmann::json::array();
  for (const MovedRegion& m : info.moved) {
    moved.push_back({{"old_va", Hex(m.old_va)},
                     {"new_va", Hex(m.new_va)},
                     {"size", m.size},
                     {"region", m.region},
                     {"kind", m.kind},
                     {"pointers_patched", m.pointers_patched}});
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
  nlohmann::json j = {
          {"capture_id", info.capture_id},
          {"kernel", info.kernel},
          {"device", info.device},
          {"relocated", info.relocated},
          {"relocation", RelocationSeverityName(info.relocation())},
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
  if (!info.launch_override.empty()) {
    j["launch_override"] = info.launch_override_json;
    j["launch"] = info.launch_override;
  }
  return j;
}

nlohmann::json NotComparedJson(const NotCompared& n) {
  return {{"index", n.index}, {"post_only", n.post_only}, {"va", Hex(n.va)}, {"kind", n.kind},
          {"name", n.name},   {"size", n.size},           {"reason", n.reason}};
}

nlohmann::json VerdictJson(const ValidationReport& report) {
  nlohmann::json failing = nlohmann::json::array(), missing = nlohmann::json::array();
  for (const RegionResult& r : report.regions) {
    if (r.passed) continue;
    failing.push_back({{"index", r.index},
                       {"va", Hex(r.va)},
                       {"kind", r.kind},
                       {"name", r.name},
                       {"elements_failing", r.stats.elements_failing},
                       {"first_fail_offset", r.stats.first_fail_offset}});
  }
  for (const NotCompared& n : report.not_compared) missing.push_back(NotComparedJson(n));
  nlohmann::json unreachable = nlohmann::json::array();
  for (const NotCompared& n : report.unreachable) unreachable.push_back(NotComparedJson(n));
  nlohmann::json j = {{"result", report.verdict()},
                      {"regions_compared", report.regions.size()},
                      {"regions_failing", report.failing()},
                      {"failing", failing},
                      {"not_compared", missing},
                      {"unreachable", unreachable}};
  if (!report.shape_probe.is_null()) j["shape_probe"] = report.shape_probe;
  return j;
}

nlohmann::json ComparisonJson(const ComparisonInfo& c) {
  nlohmann::json j = {{"path", c.path},
                      {"requested", c.requested},
                      {"device_regions", c.device_regions},
                      {"device_bytes", c.device_bytes},
                      {"host_regions", c.host_regions},
                      {"host_bytes", c.host_bytes},
                      {"rechecked_bytes", c.rechecked_bytes},
                      {"expectation_bytes", c.expectation_bytes},
                      {"golden_upload_bytes", c.golden_upload_bytes},
                      {"expectation_seconds", c.expectation_seconds},
                      {"compare_seconds", c.compare_seconds},
                      {"device_compare_seconds", c.device_compare_seconds}};
  if (!c.host_reason.empty()) j["host_reason"] = c.host_reason;
  return j;
}

nlohmann::json ValidationJson(const ValidationReport& report) {
  nlohmann::json j = ReplayInfoJson(report.info);
  j["command"] = "validate";
  j["result"] = report.verdict();
  j["regions_compared"] = report.regions.size();
  j["regions_failing"] = report.failing();
  j["regions_not_compared"] = report.not_compared.size();
  if (!report.shape_probe.is_null()) j["shape_probe"] = report.shape_probe;
  nlohmann::json missing = nlohmann::json::array();
  for (const NotCompared& n : report.not_compared) missing.push_back(NotComparedJson(n));
  j["not_compared"] = missing;
  nlohmann::json unreachable = nlohmann::json::array();
  for (const NotCompared& n : report.unreachable) unreachable.push_back(NotComparedJson(n));
  j["unreachable"] = unreachable;
  j["comparison"] = ComparisonJson(report.comparison);
  j["validate_seconds"] = report.validate_seconds;
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
                         {"compared_on", r.on_device ? "device" : "host"},
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

nlohmann::json PersistingL2Json(const PersistingL2State& l2) {
  nlohmann::json j = {{"supported", l2.supported},
                      {"limit_before_bytes", l2.limit_before},
                      {"limit_during_bytes", l2.limit_during},
                      {"lines_reset", l2.lines_reset},
                      {"stream_window_cleared", l2.window_cleared}};
  if (!l2.note.empty()) j["note"] = l2.note;
  return j;
}

bool BenchReport::verdicts_pass() const {
  for (const auto* v : {&kernel_before, &kernel_after, &original_before, &original_after}) {
    if (v->has_value() && !(*v)->passed()) return false;
  }
  return true;
}

nlohmann::json BenchJson(const BenchReport& report, bool include_samples) {
  nlohmann::json j = ReplayInfoJson(report.info);
  j["command"] = "bench";
  j["warmup"] = report.warmup;
  j["iterations"] = report.stats.iterations;
  j["cold_l2"] = report.cold_l2;
  j["l2_flush_bytes"] = report.l2_flush_bytes;
  j["restore_each"] = report.restore_each;
  j["restore_bytes_per_iteration"] = report.restore_bytes_per_iteration;
  j["protocol"] = report.protocol;
  j["persisting_l2"] = PersistingL2Json(report.persisting_l2);
  j["min_ms"] = report.stats.min_ms;
  j["median_ms"] = report.stats.median_ms;
  j["max_ms"] = report.stats.max_ms;
  j["mean_ms"] = report.stats.mean_ms;
  j["stddev_ms"] = report.stats.stddev_ms;
  j["p10_ms"] = report.stats.p10_ms;
  j["p90_ms"] = report.stats.p90_ms;
  if (include_samples) j["samples_ms"] = report.samples_ms;
  j["compare_original"] = report.compared;
  // Verdicts: "validated" before the timing loop, "revalidated" after it;
  // "validation" has the details.
  auto verdict = [](const std::optional<ValidationReport>& v) -> nlohmann::json {
    if (!v.has_value()) return nullptr;
    return v->verdict();
  };
  auto details = [](const std::optional<ValidationReport>& v) -> nlohmann::json {
    if (!v.has_value()) return nullptr;
    return VerdictJson(*v);
  };
  j["validated"] = {{"kernel", verdict(report.kernel_before)}};
  j["revalidated"] = {{"kernel", verdict(report.kernel_after)}};
  j["validation"] = {{"kernel", {{"before", details(report.kernel_before)},
                                 {"after", details(report.kernel_after)}}}};
  if (report.compared) {
    j["validated"]["original"] = verdict(report.original_before);
    j["revalidated"]["original"] = verdict(report.original_after);
    j["validation"]["original"] = {{"before", details(report.original_before)},
                                   {"after", details(report.original_after)}};
  }
  nlohmann::json changed = nlohmann::json::array();
  for (const RegionResult& r : report.changed_during_timing) {
    changed.push_back({{"index", r.index},
                       {"va", Hex(r.va)},
                       {"kind", r.kind},
                       {"name", r.name},
                       {"bytes_differing", r.stats.bytes_differing},
                       {"first_diff_offset", r.stats.first_diff_offset}});
  }
  j["validation"]["changed_during_timing"] = changed;
  if (!report.validation_note.empty()) j["validation"]["note"] = report.validation_note;
  j["verdicts_pass"] = report.verdicts_pass();
  if (report.compared) {
    const BenchComparison& c = report.comparison;
    nlohmann::json variant = BenchStatsJson(report.stats);
    variant["code_object"] = c.variant;
    nlohmann::json original = BenchStatsJson(c.original_stats);
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

std::string FormatRelocation(const ReplayInfo& info) {
  if (info.moved.empty()) return "";
  std::string out;
  if (info.relocation() == RelocationSeverity::kNote) {
    absl::StrAppendFormat(&out,
                          "note: %u small pinned host block(s) not at their captured address; no "
                          "pointer to them was found, so the kernel cannot reach them through a "
                          "captured pointer\n",
                          info.moved.size());
  } else {
    absl::StrAppendFormat(&out,
                          "RELOCATED REPLAY: %u region(s) not at their captured address; %u "
                          "pointer word(s) patched (heuristic); results may differ from a "
                          "faithful replay\n",
                          info.moved.size(), info.patched_words);
  }
  for (const MovedRegion& m : info.moved) {
    absl::StrAppendFormat(&out, "  %s region %u %s +%u -> %s: %s\n", m.kind, m.region,
                          Hex(m.old_va), m.size, Hex(m.new_va),
                          m.pointers_patched == 0
                              ? std::string("no pointer to it found")
                              : absl::StrCat(m.pointers_patched, " pointer word(s) into it patched"));
  }
  return out;
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
    out += FormatRelocation(info);
  } else {
    out += "address space: every region at its original virtual address\n";
  }
  for (const ReplayedTextureObject& t : info.texture_objects) {
    absl::StrAppendFormat(&out, "%s object %s recreated as %s over %s %s+%u\n",
                          t.surface ? "surface" : "texture", Hex(t.captured_handle),
                          Hex(t.replay_handle), t.resource, Hex(t.replay_ptr), t.bytes);
  }
  if (!info.launch_override.empty()) {
    absl::StrAppend(&out, "launch override: ", info.launch_override, "\n");
  }
  for (const std::string& w : info.warnings) absl::StrAppend(&out, "warning: ", w, "\n");
  return out;
}

std::string FormatComparison(const ComparisonInfo& c) {
  constexpr double kMiB = 1048576.0;
  std::string out;
  if (c.device_regions > 0) {
    absl::StrAppendFormat(&out,
                          "compare: %u region(s), %.1f MiB on the GPU (expected image built in "
                          "%.3f s: %.1f MiB device copy, %.1f MiB of changed chunks uploaded); "
                          "%.1f MiB rechecked on the host\n",
                          c.device_regions, c.device_bytes / kMiB, c.expectation_seconds,
                          c.expectation_bytes / kMiB, c.golden_upload_bytes / kMiB,
                          c.rechecked_bytes / kMiB);
  }
  if (c.host_regions > 0 || c.device_regions == 0) {
    absl::StrAppendFormat(&out, "compare: %u device region(s), %.1f MiB on the host%s\n",
                          c.host_regions, c.host_bytes / kMiB,
                          c.host_reason.empty() ? "" : absl::StrCat(" (", c.host_reason, ")"));
  }
  absl::StrAppendFormat(&out, "compare: path %s, %.3f s (GPU %.3f s)\n", c.path,
                        c.compare_seconds, c.device_compare_seconds);
  return out;
}

std::string FormatValidation(const ValidationReport& report) {
  std::string out = FormatReplayInfo(report.info);
  absl::StrAppendFormat(&out, "launch: %.3f ms\n", report.info.launch_ms);
  out += FormatComparison(report.comparison);
  if (report.validate_seconds > 0) {
    absl::StrAppendFormat(&out,
                          "validate: %.3f s (restore %.3f s, expected image %.3f s, launch %.3f "
                          "ms, compare %.3f s)\n",
                          report.validate_seconds, report.info.restore_seconds,
                          report.comparison.expectation_seconds, report.info.launch_ms,
                          report.comparison.compare_seconds);
  }
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
  for (const NotCompared& n : report.not_compared) {
    absl::StrAppendFormat(&out, "NOT COMPARED %s region %u %s %s%s%s (%u bytes): %s\n",
                          n.post_only ? "post-image" : "captured", n.index, Hex(n.va), n.kind,
                          n.name.empty() ? "" : " ", n.name, n.size, n.reason);
  }
  if (!report.unreachable.empty()) {
    std::vector<std::string> names;
    for (const NotCompared& n : report.unreachable) {
      if (names.size() == 4) {
        names.push_back("...");
        break;
      }
      names.push_back(n.name.empty() ? Hex(n.va) : n.name);
    }
    absl::StrAppendFormat(&out,
                          "note: %u captured module variable(s) not in the loaded code object "
                          "(%s): the captured dispatch left them unchanged and no captured "
                          "pointer points into them, so the loaded kernel cannot reach them\n",
                          report.unreachable.size(), absl::StrJoin(names, ", "));
  }
  const std::string verdict = report.verdict();
  if (verdict == "launch_shape_dependent") {
    absl::StrAppendFormat(&out,
                          "LAUNCH-SHAPE DEPENDENT: %u regions differ under the override, and the "
                          "captured code object fails at that launch too while it passes at the "
                          "captured one: the captured outputs cannot judge this launch\n",
                          report.failing());
  } else if (verdict == "incomplete") {
    absl::StrAppendFormat(&out, "INCOMPLETE: %u regions compared, %u differ, %u not compared%s\n",
                          report.regions.size(), report.failing(), report.not_compared.size(),
                          report.regions.empty() ? " (nothing was compared)" : "");
  } else {
    absl::StrAppendFormat(&out, "%s: %u regions compared, %u differ%s\n",
                          verdict == "pass" ? "PASS" : "FAIL", report.regions.size(),
                          report.failing(),
                          report.not_compared.empty()
                              ? ""
                              : absl::StrCat(", ", report.not_compared.size(), " not compared"));
  }
  return out;
}

namespace {

// "PASS", "FAIL (region 1 0x7f.. device, ...)", "INCOMPLETE (...)".
std::string VerdictLine(const std::optional<ValidationReport>& v) {
  if (!v.has_value()) return "not validated";
  std::string out = absl::AsciiStrToUpper(v->verdict());
  std::vector<std::string> what;
  for (const RegionResult& r : v->regions) {
    if (r.passed) continue;
    what.push_back(absl::StrCat("region ", r.index, " ", Hex(r.va), " ", r.kind,
                                r.name.empty() ? "" : " ", r.name, " differs"));
  }
  for (const NotCompared& n : v->not_compared) {
    what.push_back(absl::StrCat(n.post_only ? "post-image " : "", "region ", n.index, " ", n.kind,
                                n.name.empty() ? "" : " ", n.name, " not compared: ", n.reason));
  }
  if (!what.empty()) absl::StrAppend(&out, " (", absl::StrJoin(what, "; "), ")");
  return out;
}

}  // namespace

std::string FormatBench(const BenchReport& r) {
  std::string out = FormatReplayInfo(r.info);
  absl::StrAppendFormat(&out, "bench: %d warm-up, %u iterations%s%s%s\n", r.warmup,
                        r.stats.iterations, r.compared ? " of each binary" : "",
                        r.cold_l2 ? ", cold L2" : "",
                        r.restore_each ? ", written regions restored before each launch" : "");
  if (!r.protocol.empty()) absl::StrAppend(&out, "each timed launch: ", r.protocol, "\n");
  const PersistingL2State& l2 = r.persisting_l2;
  if (!l2.supported) {
    absl::StrAppend(&out, "persisting L2: not supported here (", l2.note, ")\n");
  } else {
    absl::StrAppendFormat(&out, "persisting L2: %s; timed with %u bytes set aside%s%s\n",
                          l2.limit_before > 0
                              ? absl::StrCat("a previous user had set aside ", l2.limit_before,
                                             " bytes, reset to 0")
                              : std::string("none set aside"),
                          l2.limit_during, l2.lines_reset ? ", persisting lines reset" : "",
                          l2.note.empty() ? "" : absl::StrCat(" (", l2.note, ")"));
  }
  if (!r.validation_note.empty()) absl::StrAppend(&out, "validation: ", r.validation_note, "\n");
  if (r.kernel_before.has_value() || r.kernel_after.has_value()) {
    absl::StrAppend(&out, r.compared ? "variant " : "kernel ", "before timing: ",
                    VerdictLine(r.kernel_before), "; after timing: ", VerdictLine(r.kernel_after),
                    "\n");
  }
  if (r.compared && (r.original_before.has_value() || r.original_after.has_value())) {
    absl::StrAppend(&out, "original before timing: ", VerdictLine(r.original_before),
                    "; after timing: ", VerdictLine(r.original_after), "\n");
  }
  for (const RegionResult& c : r.changed_during_timing) {
    absl::StrAppendFormat(&out,
                          "CHANGED DURING TIMING: region %u %s %s%s%s (%u bytes differ): a launch "
                          "wrote where the capture says the kernel does not\n",
                          c.index, Hex(c.va), c.kind, c.name.empty() ? "" : " ", c.name,
                          c.stats.bytes_differing);
  }
  if (!r.verdicts_pass()) out += "WARNING: a timed binary does not validate; its times are of a wrong result\n";
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
