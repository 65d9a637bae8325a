// comparator.h: compares a region's replayed bytes with the captured
// post-dispatch bytes, chunk by chunk (a region is never held whole).
//
// Exact (bitwise) by default. With a dtype and a tolerance, element e
// (expected) and a (actual) match when they are bitwise equal, or
//   |a - e| <= atol + rtol * |e|        or   ulp_distance(a, e) <= ulp
// NaN matches NaN (any payload) unless nan_equal is off; NaN never matches a
// number; an infinity matches only the same infinity. ULP distance is the
// number of representable values between a and e (+0 and -0 are 0 apart);
// it is defined for f16, bf16, f32 and f64. Integers compare by value.
#ifndef KERNCAP_REPRODUCER_REPLAY_CORE_COMPARATOR_H_
#define KERNCAP_REPRODUCER_REPLAY_CORE_COMPARATOR_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kerncap::replay {

enum class DType { kBytes, kI8, kU8, kI16, kU16, kI32, kU32, kI64, kU64, kF16, kBF16, kF32, kF64 };

// "bytes", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f16", "bf16",
// "f32", "f64" (also "int32", "float", "half", "double", ...).
absl::StatusOr<DType> ParseDType(absl::string_view name);
const char* DTypeName(DType t);
size_t DTypeSize(DType t);
bool IsFloat(DType t);

struct Tolerance {
  double atol = 0;
  double rtol = 0;
  uint64_t ulp = 0;
  bool nan_equal = true;
  bool exact() const { return atol == 0 && rtol == 0 && ulp == 0; }
};

// Decodes one element to double (f16/bf16 widened exactly).
double ElementToDouble(DType t, const void* p);
// Distance in representable values between two floats of type t (bit
// patterns given); both must be non-NaN.
uint64_t UlpDistance(DType t, uint64_t a_bits, uint64_t e_bits);

struct Mismatch {
  uint64_t offset = 0;  // byte offset inside the region
  double expected = 0;
  double actual = 0;
};

struct CompareStats {
  uint64_t bytes_compared = 0;
  uint64_t bytes_differing = 0;     // bitwise
  uint64_t elements_compared = 0;
  uint64_t elements_differing = 0;  // bitwise different
  uint64_t elements_failing = 0;    // different and outside the tolerance
  uint64_t nan_mismatches = 0;
  double max_abs_error = 0;         // over bitwise-different elements
  double max_rel_error = 0;
  uint64_t max_ulp_error = 0;
  int64_t first_diff_offset = -1;   // first bitwise difference
  int64_t first_fail_offset = -1;   // first element outside the tolerance
  std::vector<Mismatch> samples;    // the first few failing elements
};

class RegionComparator {
 public:
  static constexpr size_t kMaxSamples = 5;

  RegionComparator(DType dtype, Tolerance tolerance) : dtype_(dtype), tol_(tolerance) {}

  // Compares `size` bytes at byte `offset` of the region. Call with
  // increasing, non-overlapping offsets that are multiples of the element
  // size (chunk boundaries are); a trailing partial element is compared
  // bytewise.
  void Compare(uint64_t offset, const void* expected, const void* actual, size_t size);
  // Counts `size` bytes at `offset` known to be bitwise equal to the
  // expected bytes (compared elsewhere: validate's GPU prefilter): exactly
  // what Compare() records for equal bytes, so a region compared partly
  // here and partly elsewhere gets the statistics of one Compare() pass.
  void CountEqual(uint64_t offset, size_t size);

  bool passed() const { return stats_.elements_failing == 0; }
  const CompareStats& stats() const { return stats_; }
  DType dtype() const { return dtype_; }
  const Tolerance& tolerance() const { return tol_; }

 private:
  void Fail(uint64_t offset, double e, double a);

  DType dtype_;
  Tolerance tol_;
  CompareStats stats_;
};

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CORE_COMPARATOR_H_
