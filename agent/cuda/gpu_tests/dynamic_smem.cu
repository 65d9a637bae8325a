// dynamic_smem: a kernel using 96 KiB of dynamic shared memory, which needs
// cudaFuncAttributeMaxDynamicSharedMemorySize (> 48 KiB default). Replay must
// re-apply that function attribute. Capture target: "smem_reverse".
#include <vector>

#include "gpu_test_util.h"

__global__ void smem_reverse(const int* in, int* out, int per_block) {
  extern __shared__ int tile[];
  const int* src = in + blockIdx.x * per_block;
  int* dst = out + blockIdx.x * per_block;
  for (int i = threadIdx.x; i < per_block; i += blockDim.x) tile[i] = src[i];
  __syncthreads();
  for (int i = threadIdx.x; i < per_block; i += blockDim.x) dst[i] = tile[per_block - 1 - i];
}

int main() {
  SkipIfNoGpu("dynamic_smem");
  const int smem = 96 * 1024;
  const int per_block = smem / sizeof(int);
  const int blocks = 64;
  const int n = per_block * blocks;
  GT_CHECK(cudaFuncSetAttribute(smem_reverse, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = i * 3 + 1;
  int *din, *dout;
  GT_CHECK(cudaMalloc(&din, n * sizeof(int)));
  GT_CHECK(cudaMalloc(&dout, n * sizeof(int)));
  GT_CHECK(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  smem_reverse<<<blocks, 512, smem>>>(din, dout, per_block);
  GT_CHECK(cudaGetLastError());
  std::vector<int> out(n);
  GT_CHECK(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int b = 0; b < blocks; ++b) {
    for (int i = 0; i < per_block; ++i) {
      GT_EXPECT(out[b * per_block + i] == in[b * per_block + per_block - 1 - i], "b%d i%d", b, i);
    }
  }
  std::printf("dynamic_smem: %d blocks x %d B dynamic shared memory OK\n", blocks, smem);
  return 0;
}
