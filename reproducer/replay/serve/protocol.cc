#include "reproducer/replay/serve/protocol.h"

#include <cmath>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace kerncap::replay::serve {
namespace {

using nlohmann::json;

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("bad request: ", what));
}

const char* TypeName(const json& v) { return v.type_name(); }

// Every key of `object` must be in `allowed` (catches misspelt options,
// which would otherwise silently fall back to defaults).
absl::Status CheckKeys(const json& object, std::initializer_list<const char*> allowed,
                       absl::string_view where) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    bool known = false;
    for (const char* a : allowed) known |= it.key() == a;
    if (!known) {
      return Bad(absl::StrCat("unknown key '", it.key(), "' in ", where, " (known: ",
                              absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> IntIn(const json& v, const char* key, int lo, int hi) {
  if (!v.is_number_integer()) {
    return Bad(absl::StrCat("'", key, "' must be an integer, not ", TypeName(v)));
  }
  const bool too_big = v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(hi)
                                              : v.get<int64_t>() > hi;
  if (too_big || (!v.is_number_unsigned() && v.get<int64_t>() < lo)) {
    return Bad(absl::StrCat("'", key, "' must be between ", lo, " and ", hi, " (got ", v.dump(),
                            ")"));
  }
  return static_cast<int>(v.get<int64_t>());
}

absl::StatusOr<double> NonNegative(const json& v, const char* key) {
  if (!v.is_number()) return Bad(absl::StrCat("tolerance '", key, "' must be a number"));
  const double d = v.get<double>();
  if (!(d >= 0) || std::isinf(d)) {
    return Bad(absl::StrCat("tolerance '", key, "' must be a finite number >= 0 (got ", v.dump(),
                            ")"));
  }
  return d;
}

absl::StatusOr<bool> Bool(const json& v, const char* key) {
  if (!v.is_boolean()) return Bad(absl::StrCat("'", key, "' must be true or false"));
  return v.get<bool>();
}

absl::StatusOr<EvaluateRequest> ParseEvaluate(const json& j) {
  KC_RETURN_IF_ERROR(CheckKeys(j,
                               {"op", "id", "code_object_path", "code_object_b64", "kernel",
                                "iterations", "warmup", "validate", "restore_each", "tolerance",
                                "compare_original", "cold_l2", "launch"},
                               "an evaluate request"));
  EvaluateRequest r;
  const bool has_path = j.contains("code_object_path");
  const bool has_b64 = j.contains("code_object_b64");
  if (has_path && has_b64) {
    return Bad("give either code_object_path or code_object_b64, not both");
  }
  if (!has_path && !has_b64) {
    return Bad("missing code object: give code_object_path (a file the server can read) or "
               "code_object_b64 (the bytes, base64)");
  }
  if (has_path) {
    const json& p = j["code_object_path"];
    if (!p.is_string() || p.get<std::string>().empty()) {
      return Bad("'code_object_path' must be a non-empty string");
    }
    r.code_object_path = p.get<std::string>();
  } else {
    const json& b = j["code_object_b64"];
    if (!b.is_string() || b.get<std::string>().empty()) {
      return Bad("'code_object_b64' must be a non-empty base64 string");
    }
    std::string bytes;
    if (!absl::Base64Unescape(b.get<std::string>(), &bytes) || bytes.empty()) {
      return Bad("'code_object_b64' is not valid base64");
    }
    r.code_object = std::move(bytes);
  }
  if (j.contains("kernel")) {
    const json& k = j["kernel"];
    if (!k.is_string() || k.get<std::string>().empty()) {
      return Bad("'kernel' must be a non-empty string (a mangled name)");
    }
    r.kernel = k.get<std::string>();
  }
  if (j.contains("iterations")) {
    KC_ASSIGN_OR_RETURN(r.iterations, IntIn(j["iterations"], "iterations", 0, kMaxIterations));
  }
  if (j.contains("warmup")) {
    KC_ASSIGN_OR_RETURN(r.warmup, IntIn(j["warmup"], "warmup", 0, kMaxWarmup));
  }
  if (j.contains("validate")) {
    KC_ASSIGN_OR_RETURN(r.validate, Bool(j["validate"], "validate"));
  }
  if (j.contains("restore_each")) {
    KC_ASSIGN_OR_RETURN(bool on, Bool(j["restore_each"], "restore_each"));
    r.restore_each = on;
  }
  if (j.contains("compare_original")) {
    KC_ASSIGN_OR_RETURN(r.compare_original, Bool(j["compare_original"], "compare_original"));
  }
  if (j.contains("cold_l2")) {
    KC_ASSIGN_OR_RETURN(r.cold_l2, Bool(j["cold_l2"], "cold_l2"));
  }
  if (j.contains("launch")) {
    KC_ASSIGN_OR_RETURN(r.launch, LaunchOverrideFromJson(j["launch"]));
  }
  if (j.contains("tolerance")) {
    KC_ASSIGN_OR_RETURN(r.compare, ParseTolerance(j["tolerance"]));
    r.tolerance_json = j["tolerance"];
  }
  return r;
}

}  // namespace

absl::StatusOr<CompareOptions> ParseTolerance(const json& t) {
  if (!t.is_object()) return Bad("'tolerance' must be an object");
  KC_RETURN_IF_ERROR(
      CheckKeys(t, {"dtype", "region_dtype", "atol", "rtol", "ulp", "nan_unequal"}, "tolerance"));
  CompareOptions o;
  if (t.contains("dtype")) {
    if (!t["dtype"].is_string()) return Bad("tolerance 'dtype' must be a string");
    auto d = ParseDType(t["dtype"].get<std::string>());
    if (!d.ok()) return Bad(d.status().message());
    o.dtype = *d;
  }
  if (t.contains("region_dtype")) {
    json list = t["region_dtype"];
    if (list.is_string()) list = json::array({list});
    if (!list.is_array()) return Bad("tolerance 'region_dtype' must be a string or a list of them");
    for (const json& e : list) {
      if (!e.is_string()) return Bad("tolerance 'region_dtype' entries must be strings");
      auto rule = ParseRegionDType(e.get<std::string>());
      if (!rule.ok()) return Bad(rule.status().message());
      o.rules.push_back(*rule);
    }
  }
  if (t.contains("atol")) {
    KC_ASSIGN_OR_RETURN(o.tolerance.atol, NonNegative(t["atol"], "atol"));
  }
  if (t.contains("rtol")) {
    KC_ASSIGN_OR_RETURN(o.tolerance.rtol, NonNegative(t["rtol"], "rtol"));
  }
  if (t.contains("ulp")) {
    const json& u = t["ulp"];
    if (!u.is_number_integer() || (!u.is_number_unsigned() && u.get<int64_t>() < 0)) {
      return Bad("tolerance 'ulp' must be an integer >= 0");
    }
    o.tolerance.ulp = u.get<uint64_t>();
  }
  if (t.contains("nan_unequal")) {
    KC_ASSIGN_OR_RETURN(bool unequal, Bool(t["nan_unequal"], "nan_unequal"));
    o.tolerance.nan_equal = !unequal;
  }
  return o;
}

absl::StatusOr<Request> ParseRequest(absl::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.empty()) return Bad("empty line (expected one JSON object per line)");
  json j;
  try {
    j = json::parse(line.begin(), line.end());
  } catch (const json::parse_error& e) {
    return Bad(absl::StrCat("not JSON: ", e.what()));
  }
  if (!j.is_object()) return Bad(absl::StrCat("expected a JSON object, got ", TypeName(j)));
  Request r;
  if (j.contains("id")) r.id = j["id"];
  if (!j.contains("op")) return Bad("missing 'op' (evaluate, info or shutdown)");
  if (!j["op"].is_string()) return Bad("'op' must be a string (evaluate, info or shutdown)");
  const std::string op = j["op"].get<std::string>();
  if (op == "evaluate") {
    r.op = Op::kEvaluate;
    KC_ASSIGN_OR_RETURN(r.evaluate, ParseEvaluate(j));
  } else if (op == "info" || op == "shutdown") {
    KC_RETURN_IF_ERROR(CheckKeys(j, {"op", "id"}, absl::StrCat("an ", op, " request")));
    r.op = op == "info" ? Op::kInfo : Op::kShutdown;
  } else {
    return Bad(absl::StrCat("unknown op '", op, "' (evaluate, info or shutdown)"));
  }
  return r;
}

json RequestId(absl::string_view line) {
  json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("id")) return j["id"];
  return nullptr;
}

json EvaluateRequestJson(const EvaluateRequest& r, const json& id) {
  json j = {{"op", "evaluate"}};
  if (!id.is_null()) j["id"] = id;
  if (r.code_object.has_value()) {
    j["code_object_b64"] = absl::Base64Escape(*r.code_object);
  } else {
    j["code_object_path"] = r.code_object_path;
  }
  if (!r.kernel.empty()) j["kernel"] = r.kernel;
  j["iterations"] = r.iterations;
  j["warmup"] = r.warmup;
  j["validate"] = r.validate;
  if (r.restore_each.has_value()) j["restore_each"] = *r.restore_each;
  if (r.compare_original) j["compare_original"] = true;
  if (r.cold_l2) j["cold_l2"] = true;
  if (!r.launch.empty()) j["launch"] = LaunchOverrideJson(r.launch);
  if (!r.tolerance_json.empty()) j["tolerance"] = r.tolerance_json;
  return j;
}

json JsonNumber(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  return v;
}

const char* ValidationSummary::verdict() const {
  if (launch_shape_dependent) return "launch_shape_dependent";
  if (regions_failing > 0) return "fail";
  if (regions_compared == 0 || !not_compared.empty()) return "incomplete";
  return "pass";
}

bool ValidationSummary::passed() const { return std::string(verdict()) == "pass"; }

bool EvaluateResult::verdicts_pass() const {
  if (!validated) return true;
  if (!validation.passed()) return false;
  for (const auto* v : {&revalidation, &original_validation, &original_revalidation}) {
    if (v->has_value() && !(*v)->passed()) return false;
  }
  return true;
}

json ValidationSummaryJson(const ValidationSummary& s) {
  json regions = json::array();
  for (const RegionVerdict& v : s.regions) {
    json rj = {{"index", v.index},
               {"va", Hex(v.va)},
               {"replay_va", Hex(v.replay_va)},
               {"kind", v.kind},
               {"name", v.name},
               {"size", v.size},
               {"written", v.written},
               {"dtype", DTypeName(v.dtype)},
               {"passed", v.passed},
               {"mismatches", v.mismatches},
               {"differing", v.differing},
               {"nan_mismatches", v.nan_mismatches},
               {"worst_abs", JsonNumber(v.worst_abs)},
               {"worst_rel", JsonNumber(v.worst_rel)},
               {"worst_ulp", v.worst_ulp},
               {"first_mismatch_offset", v.first_mismatch_offset}};
    if (v.first_mismatch) {
      rj["first_mismatch"] = {{"expected", JsonNumber(v.first_mismatch->first)},
                              {"actual", JsonNumber(v.first_mismatch->second)}};
    }
    regions.push_back(std::move(rj));
  }
  json missing = json::array();
  for (const NotCompared& n : s.not_compared) missing.push_back(NotComparedJson(n));
  json unreachable = json::array();
  for (const NotCompared& n : s.unreachable) unreachable.push_back(NotComparedJson(n));
  json j = {{"passed", s.passed()},
            {"verdict", s.verdict()},
            {"regions_compared", s.regions_compared},
            {"regions_failing", s.regions_failing},
            {"regions", std::move(regions)},
            {"not_compared", std::move(missing)},
            {"unreachable", std::move(unreachable)}};
  if (!s.shape_probe.is_null()) j["shape_probe"] = s.shape_probe;
  return j;
}

json EvaluateAnswer(const json& id, const EvaluateResult& r) {
  json j = {{"ok", true}, {"id", id}, {"op", "evaluate"}, {"kernel", r.kernel}};
  if (r.validated) {
    j["validation"] = ValidationSummaryJson(r.validation);
    if (r.revalidation) j["revalidation"] = ValidationSummaryJson(*r.revalidation);
    if (r.original_validation || r.original_revalidation) {
      j["original_validation"] = {
          {"before", r.original_validation ? ValidationSummaryJson(*r.original_validation)
                                           : json(nullptr)},
          {"after", r.original_revalidation ? ValidationSummaryJson(*r.original_revalidation)
                                            : json(nullptr)}};
    }
  }
  j["verdicts_pass"] = r.verdicts_pass();
  if (!r.launch.empty()) j["launch"] = r.launch;
  j["cold_l2"] = r.cold_l2;
  j["l2_flush_bytes"] = r.l2_flush_bytes;
  j["protocol"] = r.protocol;
  j["persisting_l2"] = PersistingL2Json(r.persisting_l2);
  if (!r.moved.empty()) {
    ReplayInfo info;
    info.moved = r.moved;
    const json moved = ReplayInfoJson(info)["moved_ranges"];
    j["relocation"] = RelocationSeverityName(ClassifyRelocation(r.moved));
    j["moved_ranges"] = moved;
  }
  j["kernel_ms"] = {{"min", r.kernel_ms.min_ms},       {"median", r.kernel_ms.median_ms},
                    {"max", r.kernel_ms.max_ms},       {"mean", r.kernel_ms.mean_ms},
                    {"stddev", r.kernel_ms.stddev_ms}, {"iterations", r.kernel_ms.iterations}};
  if (r.compared) {
    const BenchStats& o = r.original_ms;
    j["original_ms"] = {{"min", o.min_ms},       {"median", o.median_ms},
                        {"max", o.max_ms},       {"mean", o.mean_ms},
                        {"stddev", o.stddev_ms}, {"iterations", o.iterations}};
    j["speedup"] = JsonNumber(r.speedup.speedup);
    j["speedup_pairs"] = {{"pairs", r.speedup.pairs},
                          {"median", JsonNumber(r.speedup.pair_median)},
                          {"p10", JsonNumber(r.speedup.pair_p10)},
                          {"p90", JsonNumber(r.speedup.pair_p90)},
                          {"min", JsonNumber(r.speedup.pair_min)},
                          {"max", JsonNumber(r.speedup.pair_max)}};
  }
  j["validation_launch_ms"] = r.validation_launch_ms;
  j["kernel_total_ms"] = r.kernel_total_ms;
  j["wall_ms"] = r.wall_ms;
  j["overhead_ms"] = r.overhead_ms;
  j["load_ms"] = r.load_ms;
  j["restored_bytes"] = r.restored_bytes;
  j["restore_each"] = r.restore_each;
  j["warmup"] = r.warmup;
  j["warnings"] = r.warnings;
  return j;
}

json ErrorAnswer(const json& id, const absl::Status& status, bool context_lost) {
  json j = {{"ok", false},
            {"id", id},
            {"error", std::string(status.message())},
            {"code", absl::StatusCodeToString(status.code())}};
  if (context_lost) j["context_lost"] = true;
  return j;
}

json InfoAnswer(const json& id, json info) {
  if (!info.is_object()) info = json::object();
  info["ok"] = true;
  info["id"] = id;
  info["op"] = "info";
  return info;
}

json ShutdownAnswer(const json& id) { return {{"ok", true}, {"id", id}, {"op", "shutdown"}}; }

std::string ToLine(const json& answer) {
  // Replace invalid UTF-8 (a kernel name or path could carry any bytes)
  // rather than throw.
  std::string s = answer.dump(-1, ' ', false, json::error_handler_t::replace);
  s.push_back('\n');
  return s;
}

}  // namespace kerncap::replay::serve
