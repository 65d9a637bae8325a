// serve_test_kernels.cu: candidate variants of one kernel for serve_gpu_test,
// compiled once per KC_VARIANT into a cubin (and the original into PTX):
//
//   scale_add(float* out, const float* in, unsigned n):
//     out[i] = 2 * in[i] + kc_bias         (kc_bias: a __device__ variable
//                                           whose captured value is 1)
//
//   0 orig     correct, spins ~20k cycles per thread first (a "slow" kernel
//              that candidates can beat)
//   1 fast     correct, no spin
//   2 slow     correct, spins ~200k cycles
//   3 wrong    out[i] off by one for every i % 1000 == 7
//   4 clobber  correct out, but zeroes in[] after reading it (writes a
//              region the captured kernel does not)
//   5 fault    writes far outside any allocation (illegal address)
//   6 renamed  correct, but named scale_add_v2 (lacks the captured kernel)
//   7 nobias   correct, with the bias a literal: lacks the module variable
//              kc_bias, which it cannot reach: a pass listing it unreachable
#ifndef KC_VARIANT
#define KC_VARIANT 0
#endif

#if KC_VARIANT == 7
#define kc_bias 1.0f
#else
__device__ float kc_bias = 0.0f;  // the capture restores 1.0f
#endif

__device__ __forceinline__ void Spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

#if KC_VARIANT == 6
extern "C" __global__ void scale_add_v2(float* out, float* in, unsigned n) {
#else
extern "C" __global__ void scale_add(float* out, float* in, unsigned n) {
#endif
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
#if KC_VARIANT == 0
  Spin(20000);
#elif KC_VARIANT == 2
  Spin(200000);
#endif
  if (i >= n) return;
  const float x = in[i];
  float y = 2.0f * x + kc_bias;
#if KC_VARIANT == 3
  if (i % 1000 == 7) y += 1.0f;
#endif
#if KC_VARIANT == 5
  if (i == 0) out[(1ull << 40) / sizeof(float)] = y;  // 1 TiB past out: unmapped
#endif
  out[i] = y;
#if KC_VARIANT == 4
  in[i] = 0.0f;
#endif
}
