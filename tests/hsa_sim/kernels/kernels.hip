// kernels.hip: HIP test kernels compiled to real AMDGPU code objects at build
// time (clang-15, gfx90a and gfx1030). The simulated HSA runtime executes them
// through host implementations (tests/hsa_sim/host_kernels.cc) that read the
// kernarg layout the compiler emitted (from the code object's metadata note).
#include <stdint.h>

__constant__ float kc_scale_bias[4];
__device__ int kc_device_counter;

extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// In place: the captured pre-state is the only correct input.
extern "C" __global__ void scale_inplace(float* x, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * s;
}

// Pointer array (T**): the pointers live in device memory.
extern "C" __global__ void sum_rows(const float* const* rows, float* out, int rows_n, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows_n) return;
  float acc = 0;
  for (int c = 0; c < cols; ++c) acc += rows[r][c];
  out[r] = acc;
}

// Reads a __constant__ variable (module global).
extern "C" __global__ void affine_const(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * kc_scale_bias[0] + kc_scale_bias[1];
  if (i == 0) atomicAdd(&kc_device_counter, 1);
}

// A mangled (C++) kernel name, to exercise demangling.
namespace kc {
template <typename T>
__global__ void fill(T* p, T v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}
template __global__ void fill<int>(int*, int, int);
}  // namespace kc
