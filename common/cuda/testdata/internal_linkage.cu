// Test input for symbol_identity_test (and the replay's GPU test): module
// variables with internal linkage, whose mangled names carry nvcc's
// per-compile module id. The build compiles this file from two folders (the
// id changes with the absolute path), with and without -rdc, and the tests
// check that the stable names of both compiles agree and that a capture of
// one compile replays with the other.
//
// internal_kernel(out, n), one block of n threads:
//   out[i] = scale_v * mode_c[i % 4] + coef_c[i % 8] + outer::nested[0]
//            + tmpl_v<float> + v2::versioned[1]
//   counter += n (atomically), plain_global += 1
namespace {
__device__ float scale_v = 2.0f;                  // anonymous namespace, .nv.global.init
__constant__ int mode_c[4] = {1, 2, 3, 4};        // anonymous namespace, .nv.constant3
template <typename T> __device__ T tmpl_v;        // anonymous-namespace template
}  // namespace
static __device__ unsigned counter;               // file static: "counter" (-rdc: __nv_static_)
static __constant__ float coef_c[8];
__device__ int plain_global;                      // external: no uniquifier
namespace outer {
namespace {
__device__ double nested[3];
}  // namespace
}  // namespace outer
namespace v2 {
static __device__ int versioned[2];              // a namespace name ending in a digit
}  // namespace v2

extern "C" __global__ void internal_kernel(float* out, int n) {
  const int i = threadIdx.x;
  if (i < n) {
    out[i] = scale_v * mode_c[i & 3] + coef_c[i & 7] + outer::nested[0] + tmpl_v<float> +
             v2::versioned[1];
    atomicAdd(&counter, 1u);
    if (i == 0) plain_global += 1;
  }
}

namespace {
__global__ void anonymous_kernel(int* p) { *p = 1; }
}  // namespace
void LaunchAnonymous(int* p) { anonymous_kernel<<<1, 1>>>(p); }
