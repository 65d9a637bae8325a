// globals_update: __constant__ and __device__ variables changed by the host
// between launches (cudaMemcpyToSymbol). Capture target: "apply_globals",
// 3rd dispatch: the captured module globals must hold the 3rd values.
#include <vector>

#include "gpu_test_util.h"

__constant__ float c_scale[4];
__device__ int d_offset;
__device__ unsigned long long d_calls;

__global__ void apply_globals(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * c_scale[i % 4] + d_offset;
  if (i == 0) atomicAdd(&d_calls, 1ull);
}

int main() {
  SkipIfNoGpu("globals_update");
  const int n = 1 << 16;
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[i] = static_cast<float>(i % 100);
  float *din, *dout;
  GT_CHECK(cudaMalloc(&din, n * sizeof(float)));
  GT_CHECK(cudaMalloc(&dout, n * sizeof(float)));
  GT_CHECK(cudaMemcpy(din, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  std::vector<float> out(n);
  for (int round = 1; round <= 4; ++round) {
    float scale[4] = {1.0f * round, 2.0f * round, 0.5f * round, -1.0f * round};
    int offset = 10 * round;
    GT_CHECK(cudaMemcpyToSymbol(c_scale, scale, sizeof(scale)));
    GT_CHECK(cudaMemcpyToSymbol(d_offset, &offset, sizeof(offset)));
    apply_globals<<<(n + 255) / 256, 256>>>(din, dout, n);
    GT_CHECK(cudaGetLastError());
    GT_CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) {
      GT_EXPECT(out[i] == in[i] * scale[i % 4] + offset, "round %d out[%d]", round, i);
    }
    std::printf("globals_update: round %d scale[0]=%g offset=%d checksum=%016llx\n", round,
                scale[0], offset, (unsigned long long)Checksum(out.data(), n * sizeof(float)));
  }
  unsigned long long calls = 0;
  GT_CHECK(cudaMemcpyFromSymbol(&calls, d_calls, sizeof(calls)));
  GT_EXPECT(calls == 4, "d_calls %llu", calls);
  std::printf("globals_update: 4 dispatches, d_calls=%llu OK\n", calls);
  return 0;
}
