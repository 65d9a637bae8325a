// histogram_atomics: int histogram (atomicAdd on int) and float weighted
// histogram (atomicAdd on float) accumulated over two dispatches. Capture
// target: "histogram" 2nd dispatch (accumulates into non-zero bins).
#include <cmath>
#include <vector>

#include "gpu_test_util.h"

constexpr int kBins = 64;

__global__ void histogram(const unsigned* keys, const float* weights, int n, int* counts,
                          float* sums) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned b = keys[i] % kBins;
    atomicAdd(&counts[b], 1);
    atomicAdd(&sums[b], weights[i]);
  }
}

int main() {
  SkipIfNoGpu("histogram_atomics");
  const int n = 1 << 20;
  std::vector<unsigned> keys(n);
  std::vector<float> w(n);
  for (int i = 0; i < n; ++i) {
    keys[i] = (i * 2654435761u) >> 7;
    w[i] = 0.25f;  // exactly representable: float sums are order-independent
  }
  unsigned* dk;
  float* dw;
  int* dc;
  float* ds;
  GT_CHECK(cudaMalloc(&dk, n * sizeof(unsigned)));
  GT_CHECK(cudaMalloc(&dw, n * sizeof(float)));
  GT_CHECK(cudaMalloc(&dc, kBins * sizeof(int)));
  GT_CHECK(cudaMalloc(&ds, kBins * sizeof(float)));
  GT_CHECK(cudaMemcpy(dk, keys.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));
  GT_CHECK(cudaMemcpy(dw, w.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  GT_CHECK(cudaMemset(dc, 0, kBins * sizeof(int)));
  GT_CHECK(cudaMemset(ds, 0, kBins * sizeof(float)));
  for (int rep = 0; rep < 2; ++rep) histogram<<<(n + 255) / 256, 256>>>(dk, dw, n, dc, ds);
  GT_CHECK(cudaGetLastError());
  std::vector<int> counts(kBins);
  std::vector<float> sums(kBins);
  GT_CHECK(cudaMemcpy(counts.data(), dc, kBins * sizeof(int), cudaMemcpyDeviceToHost));
  GT_CHECK(cudaMemcpy(sums.data(), ds, kBins * sizeof(float), cudaMemcpyDeviceToHost));
  std::vector<int> expect(kBins, 0);
  for (int i = 0; i < n; ++i) expect[keys[i] % kBins] += 2;
  for (int b = 0; b < kBins; ++b) {
    GT_EXPECT(counts[b] == expect[b], "bin %d: %d != %d", b, counts[b], expect[b]);
    GT_EXPECT(std::fabs(sums[b] - 0.25f * expect[b]) <= 1e-3f * expect[b], "sum bin %d", b);
  }
  std::printf("histogram_atomics: 2 dispatches, %d bins; counts=%p sums=%p checksum=%016llx OK\n",
              kBins, (void*)dc, (void*)ds,
              (unsigned long long)Checksum(counts.data(), kBins * sizeof(int)));
  return 0;
}
