// Test input for cubin_elf_test's texture/surface detection: kernels that
// read texture objects (1D fetch, filtered 2D, handle loaded from memory),
// one that writes a surface, and two that use neither (one takes a u64 that
// could equal a handle).
#include <cuda_runtime.h>

extern "C" __global__ void tex_linear(cudaTextureObject_t t, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<float>(t, i);
}

extern "C" __global__ void tex_filtered(float* out, cudaTextureObject_t t, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2D<float>(t, (x + 0.5f) / w, (y + 0.5f) / h);
}

extern "C" __global__ void tex_from_memory(const cudaTextureObject_t* handles, float* out) {
  out[threadIdx.x] = tex1Dfetch<float>(handles[threadIdx.x % 2], threadIdx.x);
}

extern "C" __global__ void surf_write(cudaSurfaceObject_t s, int w) {
  int x = threadIdx.x;
  if (x < w) surf2Dwrite<float>(static_cast<float>(x), s, x * 4, blockIdx.x);
}

extern "C" __global__ void no_texture(float* out, unsigned long long v) {
  out[threadIdx.x] = static_cast<float>(v) + __shfl_sync(0xffffffffu, out[threadIdx.x], 0);
}

extern "C" __global__ void no_texture_atomics(int* p, unsigned long long* q) {
  atomicAdd(p, 1);
  atomicCAS(q, 1ull, 2ull);
  atomicMax(p + 1, static_cast<int>(threadIdx.x));
}
