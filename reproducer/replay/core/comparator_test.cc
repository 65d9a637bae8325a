#include "reproducer/replay/core/comparator.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "reproducer/replay/core/compare_options.h"

namespace kerncap::replay {
namespace {

template <typename T>
CompareStats Cmp(DType t, Tolerance tol, const std::vector<T>& e, const std::vector<T>& a,
                 bool* passed = nullptr) {
  RegionComparator c(t, tol);
  c.Compare(0, e.data(), a.data(), e.size() * sizeof(T));
  if (passed) *passed = c.passed();
  return c.stats();
}

float NextUp(float f, int n) {
  for (int i = 0; i < n; ++i) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  return f;
}

TEST(ComparatorTest, ExactByDefaultReportsFirstDifference) {
  std::vector<uint32_t> e = {1, 2, 3, 4}, a = {1, 2, 7, 4};
  bool ok = true;
  CompareStats s = Cmp(DType::kBytes, {}, e, a, &ok);
  EXPECT_FALSE(ok);
  EXPECT_EQ(s.bytes_differing, 1u);
  EXPECT_EQ(s.first_diff_offset, 8);
  EXPECT_EQ(s.bytes_compared, 16u);
}

TEST(ComparatorTest, ExactFloatModeRejectsSignedZeroAndLastBit) {
  bool ok = true;
  Cmp<float>(DType::kF32, {}, {0.0f}, {-0.0f}, &ok);
  EXPECT_FALSE(ok);
  CompareStats s = Cmp<float>(DType::kF32, {}, {1.0f}, {NextUp(1.0f, 1)}, &ok);
  EXPECT_FALSE(ok);
  EXPECT_EQ(s.max_ulp_error, 1u);
  EXPECT_EQ(s.elements_failing, 1u);
}

TEST(ComparatorTest, RelativeAndAbsoluteTolerance) {
  Tolerance t;
  t.rtol = 1e-5;
  bool ok = false;
  CompareStats s = Cmp<float>(DType::kF32, t, {1000.0f, 2.0f}, {1000.005f, 2.0f}, &ok);
  EXPECT_TRUE(ok);
  EXPECT_EQ(s.elements_differing, 1u);
  EXPECT_NEAR(s.max_abs_error, 0.005, 1e-4);
  Cmp<float>(DType::kF32, t, {1000.0f}, {1000.1f}, &ok);
  EXPECT_FALSE(ok);
  // Expected zero: only atol can accept a difference.
  Cmp<float>(DType::kF32, t, {0.0f}, {1e-7f}, &ok);
  EXPECT_FALSE(ok);
  t.atol = 1e-6;
  Cmp<float>(DType::kF32, t, {0.0f}, {1e-7f}, &ok);
  EXPECT_TRUE(ok);
}

TEST(ComparatorTest, UlpToleranceF32) {
  Tolerance t;
  t.ulp = 4;
  bool ok = false;
  Cmp<float>(DType::kF32, t, {1.0f, -3.5f}, {NextUp(1.0f, 4), -3.5f}, &ok);
  EXPECT_TRUE(ok);
  Cmp<float>(DType::kF32, t, {1.0f}, {NextUp(1.0f, 5)}, &ok);
  EXPECT_FALSE(ok);
  // Across zero: the smallest denormals on each side are 2 ULP apart.
  const float tiny = std::numeric_limits<float>::denorm_min();
  CompareStats s = Cmp<float>(DType::kF32, t, {tiny}, {-tiny}, &ok);
  EXPECT_TRUE(ok);
  EXPECT_EQ(s.max_ulp_error, 2u);
}

TEST(ComparatorTest, UlpOf16BitFormats) {
  // f16: 1.0 = 0x3c00, next = 0x3c01; bf16: 1.0 = 0x3f80.
  EXPECT_EQ(UlpDistance(DType::kF16, 0x3c03, 0x3c00), 3u);
  EXPECT_EQ(UlpDistance(DType::kBF16, 0x3f80, 0xbf80), 2u * 0x3f80);
  EXPECT_EQ(UlpDistance(DType::kF16, 0x8000, 0x0000), 0u);  // -0 and +0
  uint16_t h = 0x3c00;
  EXPECT_EQ(ElementToDouble(DType::kF16, &h), 1.0);
  h = 0xc000;
  EXPECT_EQ(ElementToDouble(DType::kF16, &h), -2.0);
  h = 0x0001;  // smallest f16 denormal
  EXPECT_EQ(ElementToDouble(DType::kF16, &h), std::ldexp(1.0, -24));
  h = 0x7c00;
  EXPECT_TRUE(std::isinf(ElementToDouble(DType::kF16, &h)));
  h = 0x3f80;
  EXPECT_EQ(ElementToDouble(DType::kBF16, &h), 1.0);
  Tolerance t;
  t.ulp = 1;
  bool ok = false;
  Cmp<uint16_t>(DType::kBF16, t, {0x3f80, 0x4000}, {0x3f81, 0x4000}, &ok);
  EXPECT_TRUE(ok);
  Cmp<uint16_t>(DType::kF16, t, {0x3c00}, {0x3c02}, &ok);
  EXPECT_FALSE(ok);
}

TEST(ComparatorTest, NanHandling) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  uint32_t other_nan_bits = 0x7fc00001;
  float other_nan;
  std::memcpy(&other_nan, &other_nan_bits, 4);
  Tolerance t;
  t.rtol = 1e-3;
  bool ok = false;
  Cmp<float>(DType::kF32, t, {qnan}, {other_nan}, &ok);
  EXPECT_TRUE(ok);  // NaN matches NaN, payloads may differ
  CompareStats s = Cmp<float>(DType::kF32, t, {1.0f}, {qnan}, &ok);
  EXPECT_FALSE(ok);
  EXPECT_EQ(s.nan_mismatches, 1u);
  t.nan_equal = false;
  Cmp<float>(DType::kF32, t, {qnan}, {other_nan}, &ok);
  EXPECT_FALSE(ok);
  // Infinities: only the same infinity matches, whatever the tolerance.
  t.atol = 1e30;
  Cmp<float>(DType::kF32, t, {std::numeric_limits<float>::infinity()}, {3e38f}, &ok);
  EXPECT_FALSE(ok);
}

TEST(ComparatorTest, IntegersByValueAndChunkedOffsets) {
  Tolerance t;
  t.atol = 1;
  RegionComparator c(DType::kI32, t);
  std::vector<int32_t> e1 = {5, 6}, a1 = {5, 6}, e2 = {10, -3}, a2 = {11, -5};
  c.Compare(0, e1.data(), a1.data(), 8);
  c.Compare(8, e2.data(), a2.data(), 8);
  EXPECT_FALSE(c.passed());
  EXPECT_EQ(c.stats().elements_compared, 4u);
  EXPECT_EQ(c.stats().elements_differing, 2u);
  EXPECT_EQ(c.stats().elements_failing, 1u);
  EXPECT_EQ(c.stats().first_diff_offset, 8);
  EXPECT_EQ(c.stats().first_fail_offset, 12);
  EXPECT_EQ(c.stats().max_abs_error, 2);
  ASSERT_EQ(c.stats().samples.size(), 1u);
  EXPECT_EQ(c.stats().samples[0].expected, -3);
  EXPECT_EQ(c.stats().samples[0].actual, -5);
}

TEST(ComparatorTest, TrailingPartialElementComparedBytewise) {
  Tolerance t;
  t.rtol = 0.5;
  RegionComparator c(DType::kF32, t);
  unsigned char e[6] = {0, 0, 128, 63, 1, 2}, a[6] = {0, 0, 128, 63, 1, 9};
  c.Compare(0, e, a, 6);
  EXPECT_FALSE(c.passed());
  EXPECT_EQ(c.stats().first_diff_offset, 5);
}

TEST(ComparatorTest, ParseDTypeAndAliases) {
  EXPECT_EQ(*ParseDType("f32"), DType::kF32);
  EXPECT_EQ(*ParseDType("float"), DType::kF32);
  EXPECT_EQ(*ParseDType("BF16"), DType::kBF16);
  EXPECT_EQ(*ParseDType("int32"), DType::kI32);
  EXPECT_FALSE(ParseDType("f8").ok());
  EXPECT_EQ(DTypeSize(DType::kF64), 8u);
  EXPECT_STREQ(DTypeName(DType::kU16), "u16");
}

TEST(CompareOptionsTest, RegionRulesOverrideTheGlobalDType) {
  auto by_va = ParseRegionDType("0x7f00aa000000:f32");
  ASSERT_TRUE(by_va.ok());
  auto by_index = ParseRegionDType("3:i32");
  ASSERT_TRUE(by_index.ok());
  auto by_name = ParseRegionDType("c_scale:f16");
  ASSERT_TRUE(by_name.ok());
  EXPECT_FALSE(ParseRegionDType("0xzz:f32").ok());
  EXPECT_FALSE(ParseRegionDType("f32").ok());
  EXPECT_FALSE(ParseRegionDType("3:f7").ok());

  CompareOptions o;
  o.tolerance.rtol = 1e-4;
  o.rules = {*by_va, *by_index, *by_name};
  auto [t0, tol0] = o.For(0, 0x7f00aa000000, "");
  EXPECT_EQ(t0, DType::kF32);
  EXPECT_EQ(tol0.rtol, 1e-4);
  EXPECT_EQ(o.For(3, 0x1000, "").first, DType::kI32);
  EXPECT_EQ(o.For(5, 0x2000, "c_scale").first, DType::kF16);
  // No dtype: exact bytes, tolerance dropped.
  auto [t1, tol1] = o.For(1, 0x3000, "");
  EXPECT_EQ(t1, DType::kBytes);
  EXPECT_TRUE(tol1.exact());
  o.dtype = DType::kF64;
  EXPECT_EQ(o.For(1, 0x3000, "").first, DType::kF64);
}

TEST(CompareOptionsTest, RegionRuleToleranceReplacesTheGlobalOne) {
  CompareOptions o;
  o.dtype = DType::kF32;
  o.tolerance.atol = 1e-3;
  RegionDTypeRule loose;
  loose.index = 2;
  loose.dtype = DType::kF16;
  loose.tolerance = Tolerance{0.5, 0.25, 4, true};
  o.rules = {loose};
  auto [t, tol] = o.For(2, 0x1000, "");
  EXPECT_EQ(t, DType::kF16);
  EXPECT_EQ(tol.atol, 0.5);
  EXPECT_EQ(tol.rtol, 0.25);
  EXPECT_EQ(tol.ulp, 4u);
  // Other regions keep the global dtype and tolerance.
  auto [t1, tol1] = o.For(1, 0x2000, "");
  EXPECT_EQ(t1, DType::kF32);
  EXPECT_EQ(tol1.atol, 1e-3);
  EXPECT_EQ(tol1.ulp, 0u);
}

}  // namespace
}  // namespace kerncap::replay
