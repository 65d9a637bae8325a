#include "reproducer/replay/core/compare_options.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kerncap::replay {

absl::StatusOr<RegionDTypeRule> ParseRegionDType(absl::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos || colon == 0 || colon + 1 == text.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--region-dtype '", text, "': expected SEL:DTYPE (0xVA, index or name)"));
  }
  RegionDTypeRule rule;
  KC_ASSIGN_OR_RETURN(rule.dtype, ParseDType(text.substr(colon + 1)));
  absl::string_view sel = text.substr(0, colon);
  if (absl::StartsWithIgnoreCase(sel, "0x")) {
    uint64_t va = 0;
    if (!absl::SimpleHexAtoi(sel.substr(2), &va)) {
      return absl::InvalidArgumentError(absl::StrCat("--region-dtype: bad address '", sel, "'"));
    }
    rule.va = va;
  } else if (uint64_t idx = 0; absl::SimpleAtoi(sel, &idx)) {
    rule.index = static_cast<size_t>(idx);
  } else {
    rule.name = std::string(sel);
  }
  return rule;
}

absl::StatusOr<ComparePlace> ParseComparePlace(absl::string_view name) {
  if (name == "auto") return ComparePlace::kAuto;
  if (name == "device") return ComparePlace::kDevice;
  if (name == "host") return ComparePlace::kHost;
  return absl::InvalidArgumentError(
      absl::StrCat("--compare-on '", name, "': expected auto, device or host"));
}

const char* ComparePlaceName(ComparePlace p) {
  switch (p) {
    case ComparePlace::kDevice: return "device";
    case ComparePlace::kHost: return "host";
    case ComparePlace::kAuto: break;
  }
  return "auto";
}

std::pair<DType, Tolerance> CompareOptions::For(size_t index, uint64_t va,
                                                absl::string_view name) const {
  std::optional<DType> t = dtype;
  const Tolerance* tol = &tolerance;
  for (const RegionDTypeRule& r : rules) {
    if ((r.va && *r.va == va) || (r.index && *r.index == index) ||
        (!r.name.empty() && r.name == name)) {
      t = r.dtype;
      if (r.tolerance) tol = &*r.tolerance;
    }
  }
  if (!t) return {DType::kBytes, Tolerance{0, 0, 0, tol->nan_equal}};
  return {*t, *tol};
}

}  // namespace kerncap::replay
