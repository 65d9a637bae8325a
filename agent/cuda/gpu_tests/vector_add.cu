// vector_add: c = a + b. Capture target: kernel "vector_add" (1st dispatch).
#include <vector>

#include "gpu_test_util.h"

__global__ void vector_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

int main() {
  SkipIfNoGpu("vector_add");
  const int n = 1 << 20;
  std::vector<float> a(n), b(n), c(n);
  for (int i = 0; i < n; ++i) {
    a[i] = 0.5f * i;
    b[i] = 2.0f - i;
  }
  float *da, *db, *dc;
  GT_CHECK(cudaMalloc(&da, n * sizeof(float)));
  GT_CHECK(cudaMalloc(&db, n * sizeof(float)));
  GT_CHECK(cudaMalloc(&dc, n * sizeof(float)));
  GT_CHECK(cudaMemcpy(da, a.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  GT_CHECK(cudaMemcpy(db, b.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  vector_add<<<(n + 255) / 256, 256>>>(da, db, dc, n);
  GT_CHECK(cudaGetLastError());
  GT_CHECK(cudaMemcpy(c.data(), dc, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) GT_EXPECT(c[i] == a[i] + b[i], "c[%d]=%f", i, c[i]);
  std::printf("vector_add: n=%d a=%p b=%p c=%p checksum(c)=%016llx OK\n", n, (void*)da, (void*)db,
              (void*)dc, (unsigned long long)Checksum(c.data(), n * sizeof(float)));
  return 0;
}
