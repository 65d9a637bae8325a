// multi_gpu: the same kernel on every device; capture target: "per_device_fill"
// with device=1 (needs two GPUs; skips with one).
#include <vector>

#include "gpu_test_util.h"

__global__ void per_device_fill(int* p, int n, int dev) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = dev * 1000000 + i;
}

int main() {
  SkipIfNoGpu("multi_gpu");
  int count = 0;
  GT_CHECK(cudaGetDeviceCount(&count));
  if (count < 2) {
    std::printf("SKIP: multi_gpu: needs 2 devices, found %d\n", count);
    return kSkipCode;
  }
  const int n = 1 << 16;
  for (int dev = 0; dev < count; ++dev) {
    GT_CHECK(cudaSetDevice(dev));
    int* d;
    GT_CHECK(cudaMalloc(&d, n * sizeof(int)));
    per_device_fill<<<(n + 255) / 256, 256>>>(d, n, dev);
    GT_CHECK(cudaGetLastError());
    std::vector<int> h(n);
    GT_CHECK(cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) GT_EXPECT(h[i] == dev * 1000000 + i, "dev %d i %d", dev, i);
    std::printf("multi_gpu: device %d buffer %p OK\n", dev, (void*)d);
  }
  return 0;
}
