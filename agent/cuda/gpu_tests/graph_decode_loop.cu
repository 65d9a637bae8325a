// graph_decode_loop: the way serving engines (vLLM, SGLang) use CUDA graphs:
// one graph captured per batch size (1, 2, 4, 8) over static buffers sized
// for the largest batch, then a decode loop that replays, step by step, the
// graph of the current batch size:
//   dl_embed (h[b] = tok[b] * 977 + step-independent mix)
//   dl_mlp   (h = h * w[j] + j, per hidden element)     <- capture target
//   dl_sample (tok[b] = reduce of h[b] % 50021)
// Capture target: kernel "dl_mlp", 6th dispatch = the mlp node of decode step
// 6 (batch 4 in the schedule below): its pre image holds the tokens sampled
// at step 5. Every step's tokens are checked against the host's computation.
// `graph_decode_loop --until=FILE` repeats the schedule until FILE exists (a
// live service for `kerncapctl kernels --sample`: substitute_gpu_test).
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_test_util.h"

constexpr int kMaxBatch = 8;
constexpr int kHidden = 4096;

__global__ void dl_embed(uint32_t* h, const uint32_t* tok, int batch) {
  int b = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (b < batch && j < kHidden) h[b * kHidden + j] = tok[b] * 977u + static_cast<uint32_t>(j);
}
__global__ void dl_mlp(uint32_t* h, const uint32_t* w, int batch) {
  int b = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (b < batch && j < kHidden) h[b * kHidden + j] = h[b * kHidden + j] * w[j] + static_cast<uint32_t>(j);
}
__global__ void dl_sample(uint32_t* tok, const uint32_t* h, int batch) {
  int b = threadIdx.x;
  if (b >= batch) return;
  uint32_t acc = 0;
  for (int j = 0; j < kHidden; ++j) acc = acc * 31u + h[b * kHidden + j];
  tok[b] = acc % 50021u;
}

int main(int argc, char** argv) {
  SkipIfNoGpu("graph_decode_loop");
  std::string until;  // repeat the schedule until this file exists
  if (argc > 1 && std::strncmp(argv[1], "--until=", 8) == 0) until = argv[1] + 8;
  uint32_t *h, *w, *tok;
  GT_CHECK(cudaMalloc(&h, kMaxBatch * kHidden * sizeof(uint32_t)));
  GT_CHECK(cudaMalloc(&w, kHidden * sizeof(uint32_t)));
  GT_CHECK(cudaMalloc(&tok, kMaxBatch * sizeof(uint32_t)));
  std::vector<uint32_t> hw(kHidden), ht(kMaxBatch);
  for (int j = 0; j < kHidden; ++j) hw[j] = 2654435761u * (j + 1);
  for (int b = 0; b < kMaxBatch; ++b) ht[b] = 17 + b;
  GT_CHECK(cudaMemcpy(w, hw.data(), kHidden * sizeof(uint32_t), cudaMemcpyHostToDevice));
  GT_CHECK(cudaMemcpy(tok, ht.data(), kMaxBatch * sizeof(uint32_t), cudaMemcpyHostToDevice));
  cudaStream_t s;
  GT_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  const int sizes[] = {1, 2, 4, 8};
  cudaGraphExec_t execs[4];
  for (int k = 0; k < 4; ++k) {
    const int batch = sizes[k];
    const dim3 grid(kHidden / 256, batch), block(256);
    cudaGraph_t g;
    GT_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    dl_embed<<<grid, block, 0, s>>>(h, tok, batch);
    dl_mlp<<<grid, block, 0, s>>>(h, w, batch);
    dl_sample<<<1, kMaxBatch, 0, s>>>(tok, h, batch);
    GT_CHECK(cudaStreamEndCapture(s, &g));
    GT_CHECK(cudaGraphInstantiate(&execs[k], g, 0));
    GT_CHECK(cudaGraphDestroy(g));
  }
  const int schedule[] = {1, 2, 2, 4, 8, 4, 4, 2, 1, 8, 8, 1};  // batch size per step
  std::vector<uint32_t> got(kMaxBatch);
  int step = 0;
  int rounds = 0;
  do {
    ++rounds;
    for (int batch : schedule) {
      ++step;
      int k = batch == 1 ? 0 : batch == 2 ? 1 : batch == 4 ? 2 : 3;
      GT_CHECK(cudaGraphLaunch(execs[k], s));
      GT_CHECK(cudaStreamSynchronize(s));
      for (int b = 0; b < batch; ++b) {
        uint32_t acc = 0;
        for (int j = 0; j < kHidden; ++j) {
          uint32_t v = ht[b] * 977u + static_cast<uint32_t>(j);
          v = v * hw[j] + static_cast<uint32_t>(j);
          acc = acc * 31u + v;
        }
        ht[b] = acc % 50021u;
      }
      GT_CHECK(cudaMemcpy(got.data(), tok, kMaxBatch * sizeof(uint32_t), cudaMemcpyDeviceToHost));
      for (int b = 0; b < kMaxBatch; ++b) {
        GT_EXPECT(got[b] == ht[b], "step %d (batch %d): tok[%d] = %u, want %u", step, batch, b,
                  got[b], ht[b]);
      }
    }
  } while (!until.empty() && ::access(until.c_str(), F_OK) != 0);
  for (cudaGraphExec_t e : execs) GT_CHECK(cudaGraphExecDestroy(e));
  std::printf("graph_decode_loop: %d decode steps (%d rounds) over 4 graphs (batch 1/2/4/8), "
              "h=%p tok=%p checksum=%016llx OK\n", step, rounds, (void*)h, (void*)tok,
              (unsigned long long)Checksum(got.data(), kMaxBatch * sizeof(uint32_t)));
  return 0;
}
