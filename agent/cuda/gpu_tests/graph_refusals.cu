// graph_refusals: graphs the agent cannot run node by node, armed for their
// kernels; the application must run exactly as without the agent, the arm
// must say why nothing was captured (once per graph, not per launch) and stay
// active, so the direct launch at the end is what gets captured:
//   1. a stream-captured graph with a memory allocation and a free node
//      (cudaMallocAsync / cudaFreeAsync inside the capture) around
//      rf_alloc_kernel, launched 3 times;
//   2. a graph instantiated for device launch (cudaGraphInstantiateFlag
//      DeviceLaunch) with rf_dev_kernel, uploaded and launched 3 times from
//      the host;
//   3. rf_alloc_kernel launched directly: captured (arm --kernel=rf_ --count=1).
// Results are checked after every launch.
#include <cstdint>
#include <vector>

#include "gpu_test_util.h"

constexpr int kN = 1 << 16;

__global__ void rf_alloc_kernel(uint32_t* out, const uint32_t* in, uint32_t* scratch, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    scratch[i] = in[i] * 3u;
    out[i] = scratch[i] + 1u;
  }
}
__global__ void rf_dev_kernel(uint32_t* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 5u + 1u;
}

int main() {
  SkipIfNoGpu("graph_refusals");
  std::vector<uint32_t> hin(kN), hx(kN), got(kN);
  for (int i = 0; i < kN; ++i) hin[i] = hx[i] = static_cast<uint32_t>(i);
  uint32_t *in, *out, *x;
  GT_CHECK(cudaMalloc(&in, kN * sizeof(uint32_t)));
  GT_CHECK(cudaMalloc(&out, kN * sizeof(uint32_t)));
  GT_CHECK(cudaMalloc(&x, kN * sizeof(uint32_t)));
  GT_CHECK(cudaMemcpy(in, hin.data(), kN * sizeof(uint32_t), cudaMemcpyHostToDevice));
  GT_CHECK(cudaMemcpy(x, hx.data(), kN * sizeof(uint32_t), cudaMemcpyHostToDevice));
  cudaStream_t s;
  GT_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const dim3 grid(kN / 256), block(256);

  // 1. Graph-owned memory.
  cudaGraph_t g1;
  GT_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  uint32_t* scratch = nullptr;
  GT_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&scratch), kN * sizeof(uint32_t), s));
  rf_alloc_kernel<<<grid, block, 0, s>>>(out, in, scratch, kN);
  GT_CHECK(cudaFreeAsync(scratch, s));
  GT_CHECK(cudaStreamEndCapture(s, &g1));
  cudaGraphExec_t e1;
  GT_CHECK(cudaGraphInstantiate(&e1, g1, 0));
  for (int k = 1; k <= 3; ++k) {
    GT_CHECK(cudaMemset(out, 0, kN * sizeof(uint32_t)));
    GT_CHECK(cudaGraphLaunch(e1, s));
    GT_CHECK(cudaStreamSynchronize(s));
    GT_CHECK(cudaMemcpy(got.data(), out, kN * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    for (int i = 0; i < kN; ++i) GT_EXPECT(got[i] == hin[i] * 3u + 1u, "alloc graph %d: out[%d]", k, i);
  }
  std::printf("graph_refusals: graph with memory nodes launched 3 times OK\n");

  // 2. Device-launchable graph.
  cudaGraph_t g2;
  GT_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  rf_dev_kernel<<<grid, block, 0, s>>>(x, kN);
  GT_CHECK(cudaStreamEndCapture(s, &g2));
  cudaGraphExec_t e2;
  GT_CHECK(cudaGraphInstantiateWithFlags(&e2, g2, cudaGraphInstantiateFlagDeviceLaunch));
  GT_CHECK(cudaGraphUpload(e2, s));
  for (int k = 1; k <= 3; ++k) {
    GT_CHECK(cudaGraphLaunch(e2, s));
    GT_CHECK(cudaStreamSynchronize(s));
    for (uint32_t& v : hx) v = v * 5u + 1u;
    GT_CHECK(cudaMemcpy(got.data(), x, kN * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    for (int i = 0; i < kN; ++i) GT_EXPECT(got[i] == hx[i], "device-launch graph %d: x[%d]", k, i);
  }
  std::printf("graph_refusals: device-launch graph launched 3 times OK\n");
  GT_CHECK(cudaGraphExecDestroy(e2));  // before the direct launch: no device-launch exec left
  GT_CHECK(cudaGraphExecDestroy(e1));
  GT_CHECK(cudaGraphDestroy(g1));
  GT_CHECK(cudaGraphDestroy(g2));

  // 3. The same kernel launched directly is captured.
  uint32_t* direct_scratch;
  GT_CHECK(cudaMalloc(&direct_scratch, kN * sizeof(uint32_t)));
  rf_alloc_kernel<<<grid, block, 0, s>>>(out, in, direct_scratch, kN);
  GT_CHECK(cudaStreamSynchronize(s));
  GT_CHECK(cudaMemcpy(got.data(), out, kN * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  for (int i = 0; i < kN; ++i) GT_EXPECT(got[i] == hin[i] * 3u + 1u, "direct: out[%d]", i);
  std::printf("graph_refusals: direct launch of rf_alloc_kernel on out=%p OK\n", (void*)out);
  return 0;
}
