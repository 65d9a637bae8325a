// graph_nth_node: a graph with four launches of the same kernel, launched six
// times: `--kernel=gn_step --nth=19` must take the 3rd gn_step node of the
// 5th launch (4 per launch: 16 before it, then the 3rd), as node executions
// count like direct launches. Order inside a launch (stream capture):
//   gn_step(a=2,b=1) gn_step(a=3,b=2) gn_other gn_step(a=5,b=3) gn_step(a=7,b=4)
// so the captured node is the 4th node of 5 (node index 3); its pre image
// holds x after the four earlier launches and the first three nodes of this
// one. Every launch's result is checked.
#include <cstdint>
#include <vector>

#include "gpu_test_util.h"

__global__ void gn_step(uint32_t* x, uint32_t a, uint32_t b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + b;
}
__global__ void gn_other(uint32_t* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] ^= 0x5a5a5a5au;
}

int main() {
  SkipIfNoGpu("graph_nth_node");
  const int n = 1 << 16;
  std::vector<uint32_t> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<uint32_t>(i);
  uint32_t* x;
  GT_CHECK(cudaMalloc(&x, n * sizeof(uint32_t)));
  GT_CHECK(cudaMemcpy(x, host.data(), n * sizeof(uint32_t), cudaMemcpyHostToDevice));
  cudaStream_t s;
  GT_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const dim3 grid((n + 255) / 256), block(256);
  cudaGraph_t graph;
  GT_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  gn_step<<<grid, block, 0, s>>>(x, 2, 1, n);
  gn_step<<<grid, block, 0, s>>>(x, 3, 2, n);
  gn_other<<<grid, block, 0, s>>>(x, n);
  gn_step<<<grid, block, 0, s>>>(x, 5, 3, n);
  gn_step<<<grid, block, 0, s>>>(x, 7, 4, n);
  GT_CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  GT_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  GT_CHECK(cudaGraphDestroy(graph));
  std::vector<uint32_t> got(n);
  for (int launch = 1; launch <= 6; ++launch) {
    GT_CHECK(cudaGraphLaunch(exec, s));
    GT_CHECK(cudaStreamSynchronize(s));
    for (uint32_t& v : host) v = ((((v * 2 + 1) * 3 + 2) ^ 0x5a5a5a5au) * 5 + 3) * 7 + 4;
    GT_CHECK(cudaMemcpy(got.data(), x, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) {
      GT_EXPECT(got[i] == host[i], "launch %d: x[%d] = %u, want %u", launch, i, got[i], host[i]);
    }
  }
  GT_CHECK(cudaGraphExecDestroy(exec));
  std::printf("graph_nth_node: 6 launches of a graph with 4 gn_step nodes, x=%p checksum=%016llx OK\n",
              (void*)x, (unsigned long long)Checksum(got.data(), n * sizeof(uint32_t)));
  return 0;
}
