#include "reproducer/replay/core/compare_plan.h"

#include <algorithm>
#include <cstring>

namespace kerncap::replay {

// The kernel switches on these numbers.
static_assert(static_cast<uint32_t>(DType::kBytes) == KC_CMP_BYTES);
static_assert(static_cast<uint32_t>(DType::kI8) == KC_CMP_I8);
static_assert(static_cast<uint32_t>(DType::kU64) == KC_CMP_U64);
static_assert(static_cast<uint32_t>(DType::kF16) == KC_CMP_F16);
static_assert(static_cast<uint32_t>(DType::kBF16) == KC_CMP_BF16);
static_assert(static_cast<uint32_t>(DType::kF32) == KC_CMP_F32);
static_assert(static_cast<uint32_t>(DType::kF64) == KC_CMP_F64);

std::vector<KcCompareTile> PlanTiles(const std::vector<uint64_t>& sizes, uint64_t tile_bytes) {
  std::vector<KcCompareTile> tiles;
  for (size_t r = 0; r < sizes.size(); ++r) {
    for (uint64_t off = 0; off < sizes[r]; off += tile_bytes) {
      KcCompareTile t = {};
      t.region = static_cast<uint32_t>(r);
      t.offset = off;
      t.length = sizes[r] - off < tile_bytes ? sizes[r] - off : tile_bytes;
      tiles.push_back(t);
    }
  }
  return tiles;
}

KcCompareRegion MakeCompareRegion(uint64_t actual, uint64_t expected, uint64_t size, DType dtype,
                                  const Tolerance& tolerance) {
  KcCompareRegion r = {};
  r.actual = actual;
  r.expected = expected;
  r.size = size;
  r.dtype = static_cast<uint32_t>(dtype);
  r.elem_size = static_cast<uint32_t>(DTypeSize(dtype));
  r.flags = (tolerance.exact() ? KC_CMP_FLAG_EXACT : 0u) |
            (tolerance.nan_equal ? KC_CMP_FLAG_NAN_EQUAL : 0u);
  r.atol = tolerance.atol;
  r.rtol = tolerance.rtol;
  r.ulp = tolerance.ulp;
  return r;
}

CompareStats ToCompareStats(const KcCompareStats& raw) {
  auto as_double = [](uint64_t bits) {
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    return d;
  };
  CompareStats s;
  s.elements_failing = raw.failing;
  s.elements_differing = raw.differing;
  s.bytes_differing = raw.bytes_differing;
  s.nan_mismatches = raw.nan_mismatches;
  s.max_abs_error = as_double(raw.worst_abs_bits);
  s.max_rel_error = as_double(raw.worst_rel_bits);
  s.max_ulp_error = raw.worst_ulp;
  s.first_fail_offset = raw.first_fail_inv == 0 ? -1 : static_cast<int64_t>(~raw.first_fail_inv);
  s.first_diff_offset = raw.first_diff_inv == 0 ? -1 : static_cast<int64_t>(~raw.first_diff_inv);
  return s;
}

std::vector<CompareUnit> PlanCompareUnits(const std::vector<uint32_t>& chunk_lengths,
                                          uint64_t unit_bytes) {
  std::vector<CompareUnit> units;
  uint64_t offset = 0;
  for (size_t c = 0; c < chunk_lengths.size(); ++c) {
    const uint64_t len = chunk_lengths[c];
    if (units.empty() || (units.back().length > 0 && units.back().length + len > unit_bytes)) {
      CompareUnit u;
      u.offset = offset;
      u.first_chunk = c;
      units.push_back(u);
    }
    units.back().length += len;
    ++units.back().chunks;
    offset += len;
  }
  return units;
}

uint64_t DeviceCompareMargin(uint64_t total_bytes) {
  return std::max<uint64_t>(1ull << 30, total_bytes / 20);
}

}  // namespace kerncap::replay
