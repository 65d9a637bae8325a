// cooperative: a cooperative launch with grid-wide sync (cudaLaunchCooperativeKernel
// -> cuLaunchCooperativeKernel). Two phases: per-block partial sums, grid
// sync, block 0 reduces. Capture target: "coop_reduce".
#include <cooperative_groups.h>

#include <vector>

#include "gpu_test_util.h"

namespace cg = cooperative_groups;

__global__ void coop_reduce(const int* in, int n, int* partial, int* total) {
  cg::grid_group grid = cg::this_grid();
  __shared__ int s;
  if (threadIdx.x == 0) s = 0;
  __syncthreads();
  for (int i = grid.thread_rank(); i < n; i += grid.size()) atomicAdd(&s, in[i]);
  __syncthreads();
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
  grid.sync();
  if (grid.thread_rank() == 0) {
    int t = 0;
    for (int b = 0; b < gridDim.x; ++b) t += partial[b];
    *total = t;
  }
}

int main() {
  SkipIfNoGpu("cooperative");
  int coop = 0;
  GT_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0));
  if (!coop) {
    std::printf("SKIP: cooperative: device has no cooperative launch\n");
    return kSkipCode;
  }
  const int n = 1 << 20;
  int blocks_per_sm = 0, sms = 0;
  GT_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, coop_reduce, 256, 0));
  GT_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int blocks = sms * (blocks_per_sm > 2 ? 2 : blocks_per_sm);
  std::vector<int> in(n);
  long long expect = 0;
  for (int i = 0; i < n; ++i) {
    in[i] = i % 7;
    expect += in[i];
  }
  int *din, *dpartial, *dtotal;
  GT_CHECK(cudaMalloc(&din, n * sizeof(int)));
  GT_CHECK(cudaMalloc(&dpartial, blocks * sizeof(int)));
  GT_CHECK(cudaMalloc(&dtotal, sizeof(int)));
  GT_CHECK(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  int nn = n;
  void* args[] = {&din, &nn, &dpartial, &dtotal};
  GT_CHECK(cudaLaunchCooperativeKernel((void*)coop_reduce, blocks, 256, args, 0, 0));
  int total = 0;
  GT_CHECK(cudaMemcpy(&total, dtotal, sizeof(int), cudaMemcpyDeviceToHost));
  GT_EXPECT(total == expect, "total %d != %lld", total, expect);
  std::printf("cooperative: %d blocks with grid.sync, total=%d OK\n", blocks, total);
  return 0;
}
