// graph_stream_capture: a CUDA graph made by stream capture (the way PyTorch
// and llama.cpp make theirs) with memcpy, memset and kernel nodes:
//   H2D copy of the step's input -> memset of the accumulator -> gs_axpy
//   (acc += a * x) -> gs_scale (acc *= 2) -> D2D copy of acc to out
// instantiated once, uploaded ahead of the first launch (cudaGraphUpload), and
// launched four times with new host input each time (the application destroys
// the source graph right after instantiating).
// Capture target: kernel "gs_axpy", 2nd dispatch = the node in the 2nd graph
// launch; its pre image must hold x of step 2 and a zeroed accumulator (the
// memcpy and memset nodes before it ran), its post image acc = a * x.
// Every launch's result is checked, so an agent that ran the graph wrongly
// (skipped a node, ran them out of order, ran one twice) fails the program.
#include <vector>

#include "gpu_test_util.h"

__global__ void gs_axpy(float* acc, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) acc[i] += a * x[i];
}

__global__ void gs_scale(float* acc, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) acc[i] *= s;
}

int main() {
  SkipIfNoGpu("graph_stream_capture");
  const int n = 1 << 20;
  const float a = 3.0f;
  float* host_in;  // pinned: the H2D node reads it at every launch
  GT_CHECK(cudaMallocHost(&host_in, n * sizeof(float)));
  float *x, *acc, *out;
  GT_CHECK(cudaMalloc(&x, n * sizeof(float)));
  GT_CHECK(cudaMalloc(&acc, n * sizeof(float)));
  GT_CHECK(cudaMalloc(&out, n * sizeof(float)));
  GT_CHECK(cudaMemset(acc, 0x7f, n * sizeof(float)));  // garbage the memset node must clear
  cudaStream_t s;
  GT_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  cudaGraph_t graph;
  GT_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  GT_CHECK(cudaMemcpyAsync(x, host_in, n * sizeof(float), cudaMemcpyHostToDevice, s));
  GT_CHECK(cudaMemsetAsync(acc, 0, n * sizeof(float), s));
  gs_axpy<<<(n + 255) / 256, 256, 0, s>>>(acc, x, a, n);
  gs_scale<<<(n + 255) / 256, 256, 0, s>>>(acc, 2.0f, n);
  GT_CHECK(cudaMemcpyAsync(out, acc, n * sizeof(float), cudaMemcpyDeviceToDevice, s));
  GT_CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  GT_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  GT_CHECK(cudaGraphDestroy(graph));  // what applications do
  GT_CHECK(cudaGraphUpload(exec, s));

  std::vector<float> got(n);
  for (int step = 1; step <= 4; ++step) {
    for (int i = 0; i < n; ++i) host_in[i] = static_cast<float>((i * 7 + step) % 1013);
    GT_CHECK(cudaGraphLaunch(exec, s));
    GT_CHECK(cudaStreamSynchronize(s));
    GT_CHECK(cudaMemcpy(got.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) {
      const float want = a * host_in[i] * 2.0f;
      GT_EXPECT(got[i] == want, "step %d: out[%d] = %f, want %f", step, i, got[i], want);
    }
    std::printf("graph_stream_capture: launch %d OK (checksum %016llx)\n", step,
                (unsigned long long)Checksum(got.data(), n * sizeof(float)));
  }
  GT_CHECK(cudaGraphExecDestroy(exec));
  std::printf("graph_stream_capture: 4 graph launches (memcpy, memset, 2 kernels, memcpy) on "
              "x=%p acc=%p OK\n", (void*)x, (void*)acc);
  return 0;
}
