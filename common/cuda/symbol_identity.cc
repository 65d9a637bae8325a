#include "common/cuda/symbol_identity.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <vector>

namespace kerncap::cubin {
namespace {

constexpr std::string_view kInternal = "_INTERNAL_";
constexpr std::string_view kAnonymous = "_GLOBAL__N__";
constexpr std::string_view kRdcStatic = "__nv_static_";
constexpr std::string_view kStableInternal = "9_INTERNAL";
constexpr std::string_view kStableAnonymous = "12_GLOBAL__N_1";
constexpr std::string_view kStableRdcStatic = "__nv_static__";

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

// A decimal without leading zeros (at most 6 digits), or nullopt.
std::optional<size_t> Number(std::string_view digits) {
  if (digits.empty() || digits.size() > 6 || (digits[0] == '0')) return std::nullopt;
  size_t n = 0;
  for (char c : digits) {
    if (!IsDigit(c)) return std::nullopt;
    n = n * 10 + static_cast<size_t>(c - '0');
  }
  return n;
}

// <8 hex>_<M>_<M chars>_<suffix>: nvcc's module id.
bool IsModuleId(std::string_view u) {
  if (u.size() < 8 + 1 + 1 + 1 + 1) return false;
  for (size_t i = 0; i < 8; ++i) {
    if (!IsHex(u[i])) return false;
  }
  if (u[8] != '_') return false;
  size_t j = 9;
  while (j < u.size() && IsDigit(u[j])) ++j;
  std::optional<size_t> m = Number(u.substr(9, j - 9));
  if (!m || j >= u.size() || u[j] != '_') return false;
  ++j;
  if (*m > u.size() - j) return false;
  j += *m;
  return j < u.size() && u[j] == '_';
}

// One length-prefixed component holding a module id.
struct Component {
  size_t begin = 0;  // of its length digits
  size_t end = 0;    // one past its last character
  std::string_view token;
  std::string_view id;  // the module id inside it
};

// The readings of the component whose marker starts at `marker_at`: one per
// way to take its length from the digits before it (shortest first).
std::vector<Component> Readings(std::string_view s, size_t marker_at, std::string_view marker,
                                std::string_view token) {
  std::vector<Component> out;
  size_t run = marker_at;
  while (run > 0 && IsDigit(s[run - 1])) --run;
  for (size_t k = marker_at; k-- > run;) {
    std::optional<size_t> len = Number(s.substr(k, marker_at - k));
    if (!len || *len <= marker.size() || *len > s.size() - marker_at) continue;
    std::string_view id = s.substr(marker_at + marker.size(), *len - marker.size());
    if (!IsModuleId(id)) continue;
    out.push_back(Component{k, marker_at + *len, token, id});
  }
  return out;
}

}  // namespace

std::string StableSymbolName(std::string_view s) {
  std::vector<Component> chosen;
  std::vector<std::string_view> known_ids;
  size_t scan_from = 0;
  // -rdc: __nv_static_<N>__<U>_<inner>, N counting "_<U>".
  if (s.substr(0, kRdcStatic.size()) == kRdcStatic) {
    size_t j = kRdcStatic.size();
    while (j < s.size() && IsDigit(s[j])) ++j;
    std::optional<size_t> n = Number(s.substr(kRdcStatic.size(), j - kRdcStatic.size()));
    if (n && j < s.size() && s[j] == '_' && *n >= 2 && *n <= s.size() - j - 1 &&
        s[j + 1] == '_') {
      const size_t end = j + 1 + *n;  // one past U
      std::string_view id = s.substr(j + 2, *n - 1);
      if (IsModuleId(id) && end < s.size() && s[end] == '_') {
        chosen.push_back(Component{0, end + 1, kStableRdcStatic, id});
        known_ids.push_back(id);
        scan_from = end + 1;
      }
    }
  }
  // Every marker with its readings; unambiguous ones name the unit's id.
  struct Site {
    size_t at;
    std::vector<Component> readings;
  };
  std::vector<Site> sites;
  for (auto [marker, token] : {std::pair{kInternal, kStableInternal},
                               std::pair{kAnonymous, kStableAnonymous}}) {
    for (size_t at = s.find(marker, scan_from); at != std::string_view::npos;
         at = s.find(marker, at + 1)) {
      std::vector<Component> r = Readings(s, at, marker, token);
      if (r.empty()) continue;
      if (r.size() == 1) known_ids.push_back(r[0].id);
      sites.push_back(Site{at, std::move(r)});
    }
  }
  std::sort(sites.begin(), sites.end(), [](const Site& a, const Site& b) { return a.at < b.at; });
  for (const Site& site : sites) {
    const Component* pick = nullptr;
    if (site.readings.size() == 1) {
      pick = &site.readings[0];
    } else {
      for (const Component& c : site.readings) {
        if (std::find(known_ids.begin(), known_ids.end(), c.id) == known_ids.end()) continue;
        if (pick != nullptr) {  // two readings agree with known ids: leave it
          pick = nullptr;
          break;
        }
        pick = &c;
      }
    }
    if (pick == nullptr) continue;
    if (!chosen.empty() && pick->begin < chosen.back().end) continue;  // inside another
    chosen.push_back(*pick);
  }
  if (chosen.empty()) return std::string(s);
  std::string out;
  out.reserve(s.size());
  size_t at = 0;
  for (const Component& c : chosen) {
    out.append(s.substr(at, c.begin - at));
    out.append(c.token);
    at = c.end;
  }
  out.append(s.substr(at));
  return out;
}

bool HasCompileUniquifier(std::string_view symbol) { return StableSymbolName(symbol) != symbol; }

std::string RdcIndependentName(std::string_view stable_name) {
  if (stable_name.substr(0, kStableRdcStatic.size()) == kStableRdcStatic) {
    return std::string(stable_name.substr(kStableRdcStatic.size()));
  }
  return std::string(stable_name);
}

}  // namespace kerncap::cubin
