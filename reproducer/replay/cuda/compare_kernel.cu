// compare_kernel.cu: the device side of the on-GPU comparison (layout and
// semantics: core/compare_abi.h), used by the resident server's validation
// (serve/) and by `validate`'s device path (device_expectation.h).
// Compiled to PTX at build time (compute_75, the oldest architecture CUDA 13
// supports, so the driver can JIT it for whatever GPU replays), embedded in
// kerncap-replay as a string and JIT-loaded once per process that needs it.
// Linked against nothing: the PTX must load with cuModuleLoadData alone.
//
// The verdict per element is exactly RegionComparator's (comparator.h): an
// element matches when it is bitwise equal; otherwise, with a dtype and a
// tolerance, when |a - e| <= atol + rtol*|e| or its ULP distance <= ulp;
// NaN matches NaN only when nan_equal; an infinity only the same infinity;
// the "bytes" dtype and exact comparisons fail on any difference. Errors
// are computed in double, as on the host.
//
// Bitwise-equal 16-byte words (almost all of them, for a passing candidate)
// cost two streaming loads and a compare: the kernel runs at memory speed.
#include <stdint.h>

#include "reproducer/replay/core/compare_abi.h"

namespace {

struct Acc {
  unsigned long long failing, differing, bytes_differing, nan_mismatches;
  unsigned long long worst_abs, worst_rel, worst_ulp, first_fail_inv, first_diff_inv;
};

__device__ __forceinline__ unsigned long long DoubleBits(double d) {
  return static_cast<unsigned long long>(__double_as_longlong(d));
}

__device__ __forceinline__ unsigned long long Max(unsigned long long a, unsigned long long b) {
  return a > b ? a : b;
}

// Little-endian load of n (<= 8) bytes: only differing or misaligned
// elements come here.
__device__ __forceinline__ uint64_t LoadBits(const unsigned char* p, uint32_t n) {
  uint64_t v = 0;
  for (uint32_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

__device__ double HalfToDouble(uint32_t h) {
  const int sign = (h >> 15) & 1;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = ldexp(static_cast<double>(mant), -24);
  } else if (exp == 31) {
    v = mant == 0 ? __longlong_as_double(0x7ff0000000000000ll)
                  : __longlong_as_double(0x7ff8000000000000ll);
  } else {
    v = ldexp(static_cast<double>(mant | 0x400), exp - 25);
  }
  return sign ? -v : v;
}

__device__ double ToDouble(uint32_t dtype, uint64_t b) {
  switch (dtype) {
    case KC_CMP_I8: return static_cast<double>(static_cast<int8_t>(b));
    case KC_CMP_I16: return static_cast<double>(static_cast<int16_t>(b));
    case KC_CMP_U16: return static_cast<double>(static_cast<uint16_t>(b));
    case KC_CMP_I32: return static_cast<double>(static_cast<int32_t>(b));
    case KC_CMP_U32: return static_cast<double>(static_cast<uint32_t>(b));
    case KC_CMP_I64: return static_cast<double>(static_cast<int64_t>(b));
    case KC_CMP_U64: return static_cast<double>(b);
    case KC_CMP_F16: return HalfToDouble(static_cast<uint32_t>(b & 0xffff));
    case KC_CMP_BF16: return static_cast<double>(__uint_as_float(static_cast<uint32_t>(b << 16)));
    case KC_CMP_F32: return static_cast<double>(__uint_as_float(static_cast<uint32_t>(b)));
    case KC_CMP_F64: return __longlong_as_double(static_cast<long long>(b));
    default: return static_cast<double>(static_cast<uint8_t>(b));  // bytes, u8
  }
}

// Sign-magnitude bit pattern -> a line where neighbouring floats are 1
// apart (+0 and -0 both 0).
__device__ __forceinline__ int64_t Ordered(uint64_t v, int bits) {
  const uint64_t sign = 1ull << (bits - 1);
  const uint64_t mag = v & (sign - 1);
  return (v & sign) ? -static_cast<int64_t>(mag) : static_cast<int64_t>(mag);
}

__device__ __forceinline__ void Fail(Acc& acc, uint64_t off) {
  ++acc.failing;
  acc.first_fail_inv = Max(acc.first_fail_inv, ~off);
}

// One element whose bits differ (ab != eb), at byte `off` of its region.
__device__ __noinline__ void CompareElement(const KcCompareRegion& r, uint64_t off, uint64_t ab,
                                            uint64_t eb, Acc& acc) {
  ++acc.differing;
  const uint64_t x = ab ^ eb;
  for (uint32_t i = 0; i < r.elem_size; ++i) acc.bytes_differing += ((x >> (8 * i)) & 0xff) != 0;
  acc.first_diff_inv = Max(acc.first_diff_inv, ~off);
  const double e = ToDouble(r.dtype, eb);
  const double a = ToDouble(r.dtype, ab);
  const double inf = __longlong_as_double(0x7ff0000000000000ll);
  if (r.dtype == KC_CMP_BYTES) {
    acc.worst_abs = Max(acc.worst_abs, DoubleBits(fabs(a - e)));
    Fail(acc, off);
    return;
  }
  const bool is_float = r.dtype >= KC_CMP_F16;
  if (is_float && (isnan(e) || isnan(a))) {
    if (isnan(e) && isnan(a) && (r.flags & KC_CMP_FLAG_NAN_EQUAL)) return;
    ++acc.nan_mismatches;
    acc.worst_abs = Max(acc.worst_abs, DoubleBits(inf));
    acc.worst_rel = Max(acc.worst_rel, DoubleBits(inf));
    Fail(acc, off);
    return;
  }
  const double abs_err = (isinf(e) || isinf(a)) ? (e == a ? 0.0 : inf) : fabs(a - e);
  const double rel_err = abs_err == 0 ? 0.0 : (e == 0 ? inf : abs_err / fabs(e));
  uint64_t ulp;
  if (is_float) {
    const int bits = static_cast<int>(r.elem_size * 8);
    const int64_t oa = Ordered(ab, bits), oe = Ordered(eb, bits);
    ulp = oa >= oe ? static_cast<uint64_t>(oa) - static_cast<uint64_t>(oe)
                   : static_cast<uint64_t>(oe) - static_cast<uint64_t>(oa);
  } else {
    ulp = static_cast<uint64_t>(fmin(abs_err, 1.8e19));
  }
  acc.worst_abs = Max(acc.worst_abs, DoubleBits(abs_err));
  acc.worst_rel = Max(acc.worst_rel, DoubleBits(rel_err));
  acc.worst_ulp = Max(acc.worst_ulp, ulp);
  if (r.flags & KC_CMP_FLAG_EXACT) {
    Fail(acc, off);
    return;
  }
  const bool within_abs_rel = !isinf(abs_err) && abs_err <= r.atol + r.rtol * fabs(e);
  const bool within_ulp = is_float && r.ulp > 0 && !isinf(abs_err) && ulp <= r.ulp;
  if (!within_abs_rel && !within_ulp) Fail(acc, off);
}

// A 16-byte word that differs somewhere: element by element.
__device__ __noinline__ void CompareWord(const KcCompareRegion& r, uint64_t off, uint4 a, uint4 e,
                                         Acc& acc) {
  const uint64_t alo = a.x | (static_cast<uint64_t>(a.y) << 32);
  const uint64_t ahi = a.z | (static_cast<uint64_t>(a.w) << 32);
  const uint64_t elo = e.x | (static_cast<uint64_t>(e.y) << 32);
  const uint64_t ehi = e.z | (static_cast<uint64_t>(e.w) << 32);
  const uint32_t es = r.elem_size;
  const uint64_t mask = es == 8 ? ~0ull : ((1ull << (8 * es)) - 1);
  for (uint32_t k = 0; k < 16; k += es) {
    const uint32_t shift = 8 * (k % 8);
    const uint64_t ab = ((k < 8 ? alo : ahi) >> shift) & mask;
    const uint64_t eb = ((k < 8 ? elo : ehi) >> shift) & mask;
    if (ab != eb) CompareElement(r, off + k, ab, eb, acc);
  }
}

__device__ __forceinline__ unsigned long long WarpSum(unsigned long long v) {
  for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
  return v;
}
__device__ __forceinline__ unsigned long long WarpMax(unsigned long long v) {
  for (int d = 16; d > 0; d >>= 1) v = Max(v, __shfl_down_sync(0xffffffffu, v, d));
  return v;
}

}  // namespace

// One block per tile; blockDim.x must be a multiple of 32.
extern "C" __global__ void __launch_bounds__(256)
    kc_compare_regions(const KcCompareTile* tiles, const KcCompareRegion* regions,
                       KcCompareStats* stats) {
  const KcCompareTile t = tiles[blockIdx.x];
  const KcCompareRegion r = regions[t.region];
  const unsigned char* a = reinterpret_cast<const unsigned char*>(r.actual) + t.offset;
  const unsigned char* e = reinterpret_cast<const unsigned char*>(r.expected) + t.offset;
  Acc acc = {};
  const bool aligned =
      ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(e)) & 15) == 0;
  const uint64_t nvec = aligned ? t.length / 16 : 0;
  const uint4* av = reinterpret_cast<const uint4*>(a);
  const uint4* ev = reinterpret_cast<const uint4*>(e);
  for (uint64_t w = threadIdx.x; w < nvec; w += blockDim.x) {
    // Streaming loads: each byte is read once; keep L2 for the candidates.
    const uint4 x = __ldcs(av + w);
    const uint4 y = __ldcs(ev + w);
    if (x.x != y.x || x.y != y.y || x.z != y.z || x.w != y.w) {
      CompareWord(r, t.offset + w * 16, x, y, acc);
    }
  }
  // The rest (a region's last partial word, or everything when misaligned):
  // whole elements, then a trailing partial element bytewise.
  const uint32_t es = r.elem_size;
  const uint64_t begin = nvec * 16;
  const uint64_t elements = (t.length - begin) / es;
  for (uint64_t i = threadIdx.x; i < elements; i += blockDim.x) {
    const uint64_t o = begin + i * es;
    const uint64_t ab = LoadBits(a + o, es), eb = LoadBits(e + o, es);
    if (ab != eb) CompareElement(r, t.offset + o, ab, eb, acc);
  }
  for (uint64_t o = begin + elements * es + threadIdx.x; o < t.length; o += blockDim.x) {
    if (a[o] != e[o]) {
      ++acc.differing;
      ++acc.bytes_differing;
      acc.first_diff_inv = Max(acc.first_diff_inv, ~(t.offset + o));
      Fail(acc, t.offset + o);
    }
  }

  // Nothing differs in this block (the common case): no atomics at all.
  if (!__syncthreads_or(acc.differing != 0)) return;
  Acc w;
  w.failing = WarpSum(acc.failing);
  w.differing = WarpSum(acc.differing);
  w.bytes_differing = WarpSum(acc.bytes_differing);
  w.nan_mismatches = WarpSum(acc.nan_mismatches);
  w.worst_abs = WarpMax(acc.worst_abs);
  w.worst_rel = WarpMax(acc.worst_rel);
  w.worst_ulp = WarpMax(acc.worst_ulp);
  w.first_fail_inv = WarpMax(acc.first_fail_inv);
  w.first_diff_inv = WarpMax(acc.first_diff_inv);
  if ((threadIdx.x & 31) != 0 || w.differing == 0) return;
  KcCompareStats* s = stats + t.region;
  atomicAdd(reinterpret_cast<unsigned long long*>(&s->differing), w.differing);
  atomicAdd(reinterpret_cast<unsigned long long*>(&s->bytes_differing), w.bytes_differing);
  atomicMax(reinterpret_cast<unsigned long long*>(&s->first_diff_inv), w.first_diff_inv);
  atomicMax(reinterpret_cast<unsigned long long*>(&s->worst_abs_bits), w.worst_abs);
  atomicMax(reinterpret_cast<unsigned long long*>(&s->worst_rel_bits), w.worst_rel);
  atomicMax(reinterpret_cast<unsigned long long*>(&s->worst_ulp), w.worst_ulp);
  if (w.failing != 0) {
    atomicAdd(reinterpret_cast<unsigned long long*>(&s->failing), w.failing);
    atomicMax(reinterpret_cast<unsigned long long*>(&s->first_fail_inv), w.first_fail_inv);
  }
  if (w.nan_mismatches != 0) {
    atomicAdd(reinterpret_cast<unsigned long long*>(&s->nan_mismatches), w.nan_mismatches);
  }
}
