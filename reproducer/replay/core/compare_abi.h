// compare_abi.h: the memory layout shared by the device comparison kernel
// (cuda/compare_kernel.cu, compiled to PTX at build time and JIT-loaded at
// run time) and the host code that feeds it (cuda/device_comparator.cc).
// Plain structs of fixed-size fields only, so nvcc and the host compiler
// agree; the static_asserts below pin the sizes.
//
// One launch compares a set of device byte ranges ("regions" here) with
// their expected images: the resident server's device regions with their
// golden or pristine copies (serve/), or `validate`'s compare units with the
// device copy of the expected post image (cuda/device_expectation.h).
// Regions are cut into tiles of equal size (the last tile of a region is
// shorter); block b compares tile b and adds what it found to its region's
// stats with atomics.
#ifndef KERNCAP_REPRODUCER_REPLAY_CORE_COMPARE_ABI_H_
#define KERNCAP_REPRODUCER_REPLAY_CORE_COMPARE_ABI_H_

#include <stdint.h>

// Element types: the numeric values of replay::DType (comparator.h), in order.
enum KcCompareDType : uint32_t {
  KC_CMP_BYTES = 0, KC_CMP_I8, KC_CMP_U8, KC_CMP_I16, KC_CMP_U16, KC_CMP_I32, KC_CMP_U32,
  KC_CMP_I64, KC_CMP_U64, KC_CMP_F16, KC_CMP_BF16, KC_CMP_F32, KC_CMP_F64
};

// KcCompareRegion.flags
#define KC_CMP_FLAG_EXACT 1u      // any bitwise difference fails (no tolerance)
#define KC_CMP_FLAG_NAN_EQUAL 2u  // NaN matches NaN, whatever the payloads

struct KcCompareTile {
  uint32_t region;  // index into the region table
  uint32_t reserved;
  uint64_t offset;  // byte offset inside the region; a multiple of 16
  uint64_t length;  // bytes; a multiple of 16 except at the region's end
};

struct KcCompareRegion {
  uint64_t actual;    // device address of the replayed bytes
  uint64_t expected;  // device address of the expected bytes
  uint64_t size;      // bytes
  uint32_t dtype;     // KcCompareDType
  uint32_t elem_size; // 1, 2, 4 or 8
  uint32_t flags;
  uint32_t reserved;
  double atol;
  double rtol;
  uint64_t ulp;       // 0: no ULP tolerance
};

// Per region, accumulated with atomics. Errors are non-negative doubles
// stored as their bit patterns, whose unsigned order is their numeric order
// (so atomicMax works). first_*_inv hold ~offset (0: none), so that
// atomicMax finds the smallest offset.
struct KcCompareStats {
  uint64_t failing;          // elements outside the tolerance
  uint64_t differing;        // elements bitwise different
  uint64_t bytes_differing;
  uint64_t nan_mismatches;
  uint64_t worst_abs_bits;
  uint64_t worst_rel_bits;
  uint64_t worst_ulp;
  uint64_t first_fail_inv;
  uint64_t first_diff_inv;
  uint64_t reserved;
};

#ifdef __cplusplus
static_assert(sizeof(KcCompareTile) == 24, "KcCompareTile layout");
static_assert(sizeof(KcCompareRegion) == 64, "KcCompareRegion layout");
static_assert(sizeof(KcCompareStats) == 80, "KcCompareStats layout");
#endif

// The kernel's name in the PTX (extern "C").
#define KC_COMPARE_KERNEL_NAME "kc_compare_regions"

#endif  // KERNCAP_REPRODUCER_REPLAY_CORE_COMPARE_ABI_H_
