// std_headers.h: the C and C++ standard headers kerncap-nvrtc gives NVRTC
// itself. NVRTC has no system headers (and the host's, gcc's and glibc's,
// do not parse there), so a minimal unit whose kernel uses uint32_t or
// INT_MAX brings `#include <cstdint>` / `<climits>` and NVRTC would reject it
// ("cannot open source file"). These are what a device kernel takes from
// them, as gcc and glibc define it on x86-64 and aarch64 Linux (LP64: the
// 64-bit types are long, so mangled names match nvcc's):
//   cstdint, stdint.h    intN_t, uintN_t (N = 8, 16, 32, 64), the least/fast
//                        variants, intptr_t, uintptr_t, intmax_t, uintmax_t,
//                        INTn_MIN/MAX, UINTn_MAX, INTPTR/UINTPTR/SIZE_MAX,
//                        INTn_C/UINTn_C; in std:: too for cstdint
//   climits, limits.h    CHAR_BIT, SCHAR/UCHAR/CHAR/SHRT/USHRT/INT/UINT/LONG/
//                        ULONG/LLONG/ULLONG _MIN/_MAX
//   cfloat, float.h      FLT_/DBL_ MAX, MIN, EPSILON, DIG, MANT_DIG,
//                        MAX_EXP, MIN_EXP (gcc's literals)
//   cstddef, stddef.h    std::size_t, std::ptrdiff_t, std::nullptr_t (size_t
//                        and ptrdiff_t are NVRTC's own; no offsetof: NVRTC
//                        has no __builtin_offsetof, a unit using it is rejected)
//   cstdio, stdio.h,     nothing: NVRTC declares printf and assert itself
//   cassert, assert.h    (its assert honours NDEBUG as <cassert> does)
// Any other standard header stays missing and NVRTC rejects the unit. The
// generator's fingerprint comparison with nvcc's build is what makes a unit
// compiled with these NVRTC's to use (minimal_unit.h).
#ifndef KERNCAP_REPRODUCER_NVRTC_STD_HEADERS_H_
#define KERNCAP_REPRODUCER_NVRTC_STD_HEADERS_H_

#include <span>

namespace kerncap::repro::nvrtc {

struct BuiltinHeader {
  const char* name;  // as #include names it: "cstdint"
  const char* text;
};

std::span<const BuiltinHeader> StdHeaders();

}  // namespace kerncap::repro::nvrtc

#endif  // KERNCAP_REPRODUCER_NVRTC_STD_HEADERS_H_
