// inplace_scale: x *= s, in place, three times. Capture target: kernel
// "inplace_scale", 2nd dispatch; the pre image must hold x after the 1st
// dispatch (inputs captured before the kernel runs).
#include <vector>

#include "gpu_test_util.h"

__global__ void inplace_scale(float* x, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= s;
}

int main() {
  SkipIfNoGpu("inplace_scale");
  const int n = 1 << 18;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = 1.0f + (i % 97);
  float* dx;
  GT_CHECK(cudaMalloc(&dx, n * sizeof(float)));
  GT_CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const float scales[3] = {2.0f, 0.5f, 3.0f};
  for (float s : scales) {
    inplace_scale<<<(n + 127) / 128, 128>>>(dx, s, n);
    GT_CHECK(cudaGetLastError());
  }
  std::vector<float> out(n);
  GT_CHECK(cudaMemcpy(out.data(), dx, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) GT_EXPECT(out[i] == x[i] * 3.0f, "x[%d]=%f", i, out[i]);
  std::printf("inplace_scale: 3 dispatches (s=2, 0.5, 3) on x=%p; checksum=%016llx OK\n",
              (void*)dx, (unsigned long long)Checksum(out.data(), n * sizeof(float)));
  return 0;
}
