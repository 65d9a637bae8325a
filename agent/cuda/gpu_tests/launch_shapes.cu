// launch_shapes: one kernel launched 12 times in 3 shapes (n = 1Ki, 16Ki,
// 64Ki elements, grid sized to n), its buffer alternating between two
// allocations, so the pointer argument moves while the shape repeats.
// Capture target: `arm --kernel=shaped_scale --per-shape`: exactly 3
// captures, one per shape (dispatches 1, 2 and 3), each of which validates.
#include <vector>

#include "gpu_test_util.h"

__global__ void shaped_scale(float* x, int n, float s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * s + 1.0f;
}

int main() {
  SkipIfNoGpu("launch_shapes");
  const int sizes[3] = {1 << 10, 1 << 14, 1 << 16};
  const int max_n = 1 << 16;
  float* buf[2];
  std::vector<float> host[2];
  for (int b = 0; b < 2; ++b) {
    GT_CHECK(cudaMalloc(&buf[b], max_n * sizeof(float)));
    host[b].resize(max_n);
    for (int i = 0; i < max_n; ++i) host[b][i] = static_cast<float>((i + 7 * b) % 13);
    GT_CHECK(cudaMemcpy(buf[b], host[b].data(), max_n * sizeof(float), cudaMemcpyHostToDevice));
  }
  for (int d = 0; d < 12; ++d) {
    const int n = sizes[d % 3];
    const int b = (d / 3) % 2;  // the buffer moves between rounds of the three shapes
    shaped_scale<<<(n + 255) / 256, 256>>>(buf[b], n, 0.5f);
    GT_CHECK(cudaGetLastError());
    for (int i = 0; i < n; ++i) host[b][i] = host[b][i] * 0.5f + 1.0f;  // the expected values
  }
  for (int b = 0; b < 2; ++b) {
    std::vector<float> out(max_n);
    GT_CHECK(cudaMemcpy(out.data(), buf[b], max_n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < max_n; ++i) {
      GT_EXPECT(out[i] == host[b][i], "buf%d[%d]=%f, expected %f", b, i, out[i], host[b][i]);
    }
  }
  std::printf("launch_shapes: 12 dispatches in 3 shapes over 2 buffers (%p, %p) OK\n",
              (void*)buf[0], (void*)buf[1]);
  return 0;
}
