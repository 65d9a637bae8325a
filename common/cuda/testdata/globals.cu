// Test input for cubin_elf_test: module-scope variables of every kind the
// agent must find, and two kernels that use them.
__device__ float dev_scale = 2.0f;      // .nv.global.init (initialized)
__device__ int dev_counter;             // .nv.global (zero-initialized)
__device__ double dev_table[64];        // .nv.global
__constant__ float const_coeffs[16];    // .nv.constant3
__constant__ int const_mode = 3;        // .nv.constant3

extern "C" __global__ void scale_kernel(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * dev_scale * const_coeffs[i % 16] + dev_table[i % 64];
  if (i == 0) atomicAdd(&dev_counter, const_mode);
}

template <typename T>
__global__ void templated_kernel(T* p) { p[threadIdx.x] += static_cast<T>(const_mode); }
template __global__ void templated_kernel<int>(int*);
