// pipeline: three kernels run in sequence, 8 iterations. Capture target:
// kernel "stage3_normalize" with nth=5 (its 5th dispatch): the pre image must
// be the state after stage1/stage2 of iteration 5 and stage3 of iteration 4.
#include <cmath>
#include <vector>

#include "gpu_test_util.h"

__global__ void stage1_fill(float* a, int n, int iter) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = static_cast<float>((i + iter) % 17);
}
__global__ void stage2_square_add(const float* a, float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] += a[i] * a[i];
}
__global__ void stage3_normalize(const float* b, float* c, int n, float denom) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = b[i] / denom;
}

int main() {
  SkipIfNoGpu("pipeline");
  const int n = 1 << 16;
  float *a, *b, *c;
  GT_CHECK(cudaMalloc(&a, n * sizeof(float)));
  GT_CHECK(cudaMalloc(&b, n * sizeof(float)));
  GT_CHECK(cudaMalloc(&c, n * sizeof(float)));
  GT_CHECK(cudaMemset(b, 0, n * sizeof(float)));
  std::vector<float> hb(n, 0.0f), hc(n);
  const int grid = (n + 255) / 256;
  for (int iter = 1; iter <= 8; ++iter) {
    stage1_fill<<<grid, 256>>>(a, n, iter);
    stage2_square_add<<<grid, 256>>>(a, b, n);
    stage3_normalize<<<grid, 256>>>(b, c, n, static_cast<float>(iter));
    GT_CHECK(cudaGetLastError());
    for (int i = 0; i < n; ++i) {
      float v = static_cast<float>((i + iter) % 17);
      hb[i] += v * v;
    }
  }
  GT_CHECK(cudaMemcpy(hc.data(), c, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) GT_EXPECT(std::fabs(hc[i] - hb[i] / 8.0f) < 1e-3f, "c[%d]", i);
  std::printf("pipeline: 3 kernels x 8 iterations (capture stage3_normalize nth=5); a=%p b=%p "
              "c=%p OK\n",
              (void*)a, (void*)b, (void*)c);
  return 0;
}
