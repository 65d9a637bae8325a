#include "reproducer/replay/core/launch_override.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kerncap::replay {

const char* CachePreferenceName(CachePreference p) {
  switch (p) {
    case CachePreference::kNone: return "none";
    case CachePreference::kShared: return "shared";
    case CachePreference::kL1: return "l1";
    case CachePreference::kEqual: return "equal";
  }
  return "none";
}

absl::StatusOr<CachePreference> ParseCachePreference(absl::string_view s) {
  const std::string v = absl::AsciiStrToLower(s);
  if (v == "none") return CachePreference::kNone;
  if (v == "shared") return CachePreference::kShared;
  if (v == "l1") return CachePreference::kL1;
  if (v == "equal") return CachePreference::kEqual;
  return absl::InvalidArgumentError(
      absl::StrCat("cache preference \"", s, "\": expected none, shared, l1 or equal"));
}

absl::StatusOr<Dim3> ParseDim3(absl::string_view s) {
  std::vector<absl::string_view> parts = absl::StrSplit(s, absl::ByAnyChar(",x"));
  if (parts.empty() || parts.size() > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("dimensions \"", s, "\": expected X, X,Y or X,Y,Z (or XxYxZ)"));
  }
  Dim3 d{1, 1, 1};
  for (size_t i = 0; i < parts.size(); ++i) {
    uint32_t v = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(parts[i]), &v) || v == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dimensions \"", s, "\": \"", parts[i], "\" is not a positive 32-bit integer"));
    }
    d[i] = v;
  }
  return d;
}

std::string FormatDim3(const Dim3& d) { return absl::StrCat(d[0], ",", d[1], ",", d[2]); }

LaunchShape CapturedLaunch(const v1::LaunchConfig& l) {
  auto dim = [](const google::protobuf::RepeatedField<uint32_t>& v) {
    Dim3 d{1, 1, 1};
    for (int i = 0; i < 3 && i < v.size(); ++i) d[i] = v.Get(i) != 0 ? v.Get(i) : 1u;
    return d;
  };
  LaunchShape s;
  s.grid = dim(l.grid());
  s.block = dim(l.block());
  s.cluster = dim(l.cluster());
  s.shared_mem_bytes = l.shared_mem_bytes();
  s.cooperative = l.cooperative();
  return s;
}

absl::StatusOr<LaunchShape> ApplyLaunchOverride(const LaunchShape& captured,
                                                const LaunchOverride& o) {
  LaunchShape s = captured;
  if (!o.changes_shape()) {
    // The captured shape is what the application launched: not second-guessed.
    if (o.max_dynamic_shared_mem && s.shared_mem_bytes > *o.max_dynamic_shared_mem) {
      return absl::InvalidArgumentError(absl::StrCat(
          "launch override: the captured ", s.shared_mem_bytes, " bytes of dynamic shared "
          "memory exceed the max dynamic shared memory attribute (", *o.max_dynamic_shared_mem,
          ")"));
    }
    return s;
  }
  if (o.grid) s.grid = *o.grid;
  if (o.block) s.block = *o.block;
  if (o.cluster) s.cluster = *o.cluster;
  if (o.shared_mem_bytes) s.shared_mem_bytes = *o.shared_mem_bytes;
  for (int i = 0; i < 3; ++i) {
    if (s.grid[i] == 0 || s.block[i] == 0 || s.cluster[i] == 0) {
      return absl::InvalidArgumentError("launch override: every dimension must be at least 1");
    }
  }
  if (s.grid[0] > 0x7fffffffu || s.grid[1] > 65535 || s.grid[2] > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "launch override: grid (", FormatDim3(s.grid),
        ") is out of range (x <= 2147483647, y and z <= 65535)"));
  }
  const uint64_t threads = uint64_t{s.block[0]} * s.block[1] * s.block[2];
  if (threads > 1024 || s.block[0] > 1024 || s.block[1] > 1024 || s.block[2] > 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "launch override: block (", FormatDim3(s.block), ") has ", threads,
        " threads; at most 1024 (x, y <= 1024, z <= 64)"));
  }
  if (s.has_cluster()) {
    const uint64_t cluster_blocks = uint64_t{s.cluster[0]} * s.cluster[1] * s.cluster[2];
    if (cluster_blocks > 16) {
      return absl::InvalidArgumentError(absl::StrCat(
          "launch override: cluster (", FormatDim3(s.cluster), ") has ", cluster_blocks,
          " blocks; at most 16"));
    }
    for (int i = 0; i < 3; ++i) {
      if (s.grid[i] % s.cluster[i] != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "launch override: the grid (", FormatDim3(s.grid),
            ") is not a multiple of the cluster (", FormatDim3(s.cluster), ")"));
      }
    }
    if (s.cooperative) {
      return absl::InvalidArgumentError(
          "launch override: the captured launch is cooperative; clusters cannot be added to it");
    }
  }
  if (o.max_dynamic_shared_mem && s.shared_mem_bytes > *o.max_dynamic_shared_mem) {
    return absl::InvalidArgumentError(absl::StrCat(
        "launch override: ", s.shared_mem_bytes, " bytes of dynamic shared memory exceed the "
        "max dynamic shared memory attribute (", *o.max_dynamic_shared_mem, ")"));
  }
  return s;
}

std::string DescribeLaunch(const LaunchShape& s) {
  std::string out = absl::StrCat("grid=(", FormatDim3(s.grid), ") block=(", FormatDim3(s.block),
                                 ") smem=", s.shared_mem_bytes);
  if (s.has_cluster()) absl::StrAppend(&out, " cluster=(", FormatDim3(s.cluster), ")");
  if (s.cooperative) absl::StrAppend(&out, " cooperative");
  return out;
}

nlohmann::json LaunchOverrideJson(const LaunchOverride& o) {
  nlohmann::json j = nlohmann::json::object();
  auto dim = [](const Dim3& d) { return nlohmann::json::array({d[0], d[1], d[2]}); };
  if (o.grid) j["grid"] = dim(*o.grid);
  if (o.block) j["block"] = dim(*o.block);
  if (o.cluster) j["cluster"] = dim(*o.cluster);
  if (o.shared_mem_bytes) j["shared_mem_bytes"] = *o.shared_mem_bytes;
  if (o.max_dynamic_shared_mem) j["max_dynamic_shared_mem"] = *o.max_dynamic_shared_mem;
  if (o.cache_preference) j["cache_preference"] = CachePreferenceName(*o.cache_preference);
  return j;
}

namespace {

absl::StatusOr<uint32_t> U32(const nlohmann::json& v, const std::string& what) {
  if (!v.is_number_unsigned() || v.get<uint64_t>() > 0xffffffffu) {
    return absl::InvalidArgumentError(
        absl::StrCat("launch.", what, ": expected an unsigned 32-bit integer"));
  }
  return v.get<uint32_t>();
}

absl::StatusOr<Dim3> Dim(const nlohmann::json& v, const std::string& what) {
  if (v.is_string()) return ParseDim3(v.get<std::string>());
  if (!v.is_array() || v.empty() || v.size() > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("launch.", what, ": expected an array of 1 to 3 positive integers"));
  }
  Dim3 d{1, 1, 1};
  for (size_t i = 0; i < v.size(); ++i) {
    absl::StatusOr<uint32_t> x = U32(v[i], what);
    if (!x.ok()) return x.status();
    if (*x == 0) return absl::InvalidArgumentError(absl::StrCat("launch.", what, ": 0"));
    d[i] = *x;
  }
  return d;
}

}  // namespace

absl::StatusOr<LaunchOverride> LaunchOverrideFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("launch: expected an object");
  LaunchOverride o;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const nlohmann::json& v = it.value();
    if (k == "grid" || k == "block" || k == "cluster") {
      absl::StatusOr<Dim3> d = Dim(v, k);
      if (!d.ok()) return d.status();
      (k == "grid" ? o.grid : k == "block" ? o.block : o.cluster) = *d;
    } else if (k == "shared_mem_bytes" || k == "max_dynamic_shared_mem") {
      absl::StatusOr<uint32_t> x = U32(v, k);
      if (!x.ok()) return x.status();
      (k == "shared_mem_bytes" ? o.shared_mem_bytes : o.max_dynamic_shared_mem) = *x;
    } else if (k == "cache_preference") {
      if (!v.is_string()) return absl::InvalidArgumentError("launch.cache_preference: a string");
      absl::StatusOr<CachePreference> p = ParseCachePreference(v.get<std::string>());
      if (!p.ok()) return p.status();
      o.cache_preference = *p;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "launch: unknown key \"", k, "\" (grid, block, shared_mem_bytes, "
          "max_dynamic_shared_mem, cache_preference, cluster)"));
    }
  }
  return o;
}

}  // namespace kerncap::replay
