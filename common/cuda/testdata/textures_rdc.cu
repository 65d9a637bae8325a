// Test input for cubin_elf_test, compiled with -rdc=true: a texture read in a
// device function that keeps its own .text section; every kernel of the
// module may call it, so every kernel counts as reading textures.
#include <cuda_runtime.h>

extern "C" __device__ __noinline__ float fetch(cudaTextureObject_t t, int i) {
  return tex1Dfetch<float>(t, i);
}

extern "C" __global__ void calls_fetch(cudaTextureObject_t t, float* out) {
  out[threadIdx.x] = fetch(t, threadIdx.x);
}

extern "C" __global__ void plain(float* out) { out[threadIdx.x] = 1.0f; }
