#include "reproducer/replay/core/comparator.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace kerncap::replay {
namespace {

struct DTypeInfo {
  DType type;
  const char* name;
  size_t size;
};
constexpr DTypeInfo kTypes[] = {
    {DType::kBytes, "bytes", 1}, {DType::kI8, "i8", 1},    {DType::kU8, "u8", 1},
    {DType::kI16, "i16", 2},     {DType::kU16, "u16", 2},  {DType::kI32, "i32", 4},
    {DType::kU32, "u32", 4},     {DType::kI64, "i64", 8},  {DType::kU64, "u64", 8},
    {DType::kF16, "f16", 2},     {DType::kBF16, "bf16", 2}, {DType::kF32, "f32", 4},
    {DType::kF64, "f64", 8},
};

uint64_t LoadBits(const void* p, size_t n) {
  uint64_t v = 0;
  std::memcpy(&v, p, n);  // little-endian host
  return v;
}

double HalfToDouble(uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), -24);
  } else if (exp == 31) {
    v = mant == 0 ? std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::quiet_NaN();
  } else {
    v = std::ldexp(static_cast<double>(mant | 0x400), exp - 25);
  }
  return sign ? -v : v;
}

// Maps a sign-magnitude float bit pattern of `bits` width onto a line where
// adjacent representable values differ by one (+0 and -0 both map to 0).
int64_t Ordered(uint64_t v, int bits) {
  const uint64_t sign = 1ull << (bits - 1);
  const uint64_t mag = v & (sign - 1);
  return (v & sign) ? -static_cast<int64_t>(mag) : static_cast<int64_t>(mag);
}

}  // namespace

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  std::string n = absl::AsciiStrToLower(name);
  static const struct {
    const char* alias;
    const char* name;
  } kAliases[] = {{"byte", "bytes"},    {"raw", "bytes"},    {"int8", "i8"},   {"uint8", "u8"},
                  {"int16", "i16"},     {"uint16", "u16"},   {"int32", "i32"}, {"int", "i32"},
                  {"uint32", "u32"},    {"int64", "i64"},    {"uint64", "u64"}, {"half", "f16"},
                  {"float16", "f16"},   {"bfloat16", "bf16"}, {"float", "f32"}, {"float32", "f32"},
                  {"double", "f64"},    {"float64", "f64"}};
  for (const auto& a : kAliases) {
    if (n == a.alias) n = a.name;
  }
  for (const auto& t : kTypes) {
    if (n == t.name) return t.type;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name, "' (bytes, i8..i64, u8..u64, f16, bf16, f32, f64)"));
}

const char* DTypeName(DType t) {
  for (const auto& i : kTypes) {
    if (i.type == t) return i.name;
  }
  return "?";
}

size_t DTypeSize(DType t) {
  for (const auto& i : kTypes) {
    if (i.type == t) return i.size;
  }
  return 1;
}

bool IsFloat(DType t) {
  return t == DType::kF16 || t == DType::kBF16 || t == DType::kF32 || t == DType::kF64;
}

double ElementToDouble(DType t, const void* p) {
  switch (t) {
    case DType::kBytes:
    case DType::kU8: return static_cast<double>(*static_cast<const uint8_t*>(p));
    case DType::kI8: return static_cast<double>(*static_cast<const int8_t*>(p));
    case DType::kI16: return static_cast<double>(static_cast<int16_t>(LoadBits(p, 2)));
    case DType::kU16: return static_cast<double>(static_cast<uint16_t>(LoadBits(p, 2)));
    case DType::kI32: return static_cast<double>(static_cast<int32_t>(LoadBits(p, 4)));
    case DType::kU32: return static_cast<double>(static_cast<uint32_t>(LoadBits(p, 4)));
    case DType::kI64: return static_cast<double>(static_cast<int64_t>(LoadBits(p, 8)));
    case DType::kU64: return static_cast<double>(LoadBits(p, 8));
    case DType::kF16: return HalfToDouble(static_cast<uint16_t>(LoadBits(p, 2)));
    case DType::kBF16: {
      uint32_t w = static_cast<uint32_t>(LoadBits(p, 2)) << 16;
      float f;
      std::memcpy(&f, &w, 4);
      return f;
    }
    case DType::kF32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kF64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
  }
  return 0;
}

uint64_t UlpDistance(DType t, uint64_t a_bits, uint64_t e_bits) {
  const int bits = static_cast<int>(DTypeSize(t) * 8);
  const int64_t a = Ordered(a_bits, bits);
  const int64_t e = Ordered(e_bits, bits);
  // |a - e| without overflow for 64-bit patterns.
  return a >= e ? static_cast<uint64_t>(a) - static_cast<uint64_t>(e)
                : static_cast<uint64_t>(e) - static_cast<uint64_t>(a);
}

void RegionComparator::Fail(uint64_t offset, double e, double a) {
  ++stats_.elements_failing;
  if (stats_.first_fail_offset < 0) stats_.first_fail_offset = static_cast<int64_t>(offset);
  if (stats_.samples.size() < kMaxSamples) stats_.samples.push_back(Mismatch{offset, e, a});
}

void RegionComparator::CountEqual(uint64_t /*offset*/, size_t size) {
  stats_.bytes_compared += size;
  stats_.elements_compared += (size + DTypeSize(dtype_) - 1) / DTypeSize(dtype_);
}

void RegionComparator::Compare(uint64_t offset, const void* expected, const void* actual,
                               size_t size) {
  const unsigned char* ep = static_cast<const unsigned char*>(expected);
  const unsigned char* ap = static_cast<const unsigned char*>(actual);
  // Fast path: identical chunks (the overwhelmingly common case).
  if (std::memcmp(ep, ap, size) == 0) {
    CountEqual(offset, size);
    return;
  }
  stats_.bytes_compared += size;
  for (size_t i = 0; i < size; ++i) stats_.bytes_differing += ep[i] != ap[i];

  const size_t es = DTypeSize(dtype_);
  const bool is_float = IsFloat(dtype_);
  size_t i = 0;
  for (; i + es <= size; i += es) {
    ++stats_.elements_compared;
    if (std::memcmp(ep + i, ap + i, es) == 0) continue;
    const uint64_t at = offset + i;
    ++stats_.elements_differing;
    if (stats_.first_diff_offset < 0) stats_.first_diff_offset = static_cast<int64_t>(at);
    const double e = ElementToDouble(dtype_, ep + i);
    const double a = ElementToDouble(dtype_, ap + i);
    if (dtype_ == DType::kBytes) {
      stats_.max_abs_error = std::max(stats_.max_abs_error, std::fabs(a - e));
      Fail(at, e, a);
      continue;
    }
    if (is_float && (std::isnan(e) || std::isnan(a))) {
      if (std::isnan(e) && std::isnan(a) && tol_.nan_equal) continue;  // payloads may differ
      ++stats_.nan_mismatches;
      stats_.max_abs_error = std::numeric_limits<double>::infinity();
      stats_.max_rel_error = std::numeric_limits<double>::infinity();
      Fail(at, e, a);
      continue;
    }
    const double abs_err = (std::isinf(e) || std::isinf(a))
                               ? (e == a ? 0 : std::numeric_limits<double>::infinity())
                               : std::fabs(a - e);
    const double rel_err = abs_err == 0 ? 0
                           : e == 0     ? std::numeric_limits<double>::infinity()
                                        : abs_err / std::fabs(e);
    uint64_t ulp = 0;
    if (is_float) {
      ulp = UlpDistance(dtype_, LoadBits(ap + i, es), LoadBits(ep + i, es));
    } else {
      ulp = static_cast<uint64_t>(std::min(abs_err, 1.8e19));
    }
    stats_.max_abs_error = std::max(stats_.max_abs_error, abs_err);
    stats_.max_rel_error = std::max(stats_.max_rel_error, rel_err);
    stats_.max_ulp_error = std::max(stats_.max_ulp_error, ulp);
    if (tol_.exact()) {
      Fail(at, e, a);
      continue;
    }
    const bool within_abs_rel =
        !std::isinf(abs_err) && abs_err <= tol_.atol + tol_.rtol * std::fabs(e);
    const bool within_ulp = is_float && tol_.ulp > 0 && !std::isinf(abs_err) && ulp <= tol_.ulp;
    if (!within_abs_rel && !within_ulp) Fail(at, e, a);
  }
  // Trailing partial element: bytewise.
  for (; i < size; ++i) {
    ++stats_.elements_compared;
    if (ep[i] == ap[i]) continue;
    ++stats_.elements_differing;
    if (stats_.first_diff_offset < 0) stats_.first_diff_offset = static_cast<int64_t>(offset + i);
    Fail(offset + i, ep[i], ap[i]);
  }
}

}  // namespace kerncap::replay
