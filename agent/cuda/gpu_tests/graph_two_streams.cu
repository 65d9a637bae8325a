// graph_two_streams: two application threads, each replaying its own graph on
// its own stream, at the same time:
//   thread A: graph GA captured across two streams (fork / join through
//             events: ts_left and ts_right run on parallel branches, ts_join
//             after both), replayed 40 times on stream A;
//   thread B: graph GB (ts_target, ts_tail), replayed 40 times on stream B.
// Capture target: kernel "ts_target", 10th dispatch (launch 10 of GB) while
// thread A keeps launching: the capture must quiesce both streams, and both
// threads' results stay right (checked after every launch).
#include <cstdint>
#include <thread>
#include <vector>

#include "gpu_test_util.h"

constexpr int kN = 1 << 16;

__global__ void ts_left(uint32_t* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = a[i] * 3u + 1u;
}
__global__ void ts_right(uint32_t* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = b[i] * 5u + 2u;
}
__global__ void ts_join(uint32_t* a, const uint32_t* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] ^= b[i];
}
__global__ void ts_target(uint32_t* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = c[i] * 7u + static_cast<uint32_t>(i);
}
__global__ void ts_tail(uint32_t* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] += 11u;
}

static uint32_t* DeviceIota(std::vector<uint32_t>* host, uint32_t base) {
  host->resize(kN);
  for (int i = 0; i < kN; ++i) (*host)[i] = base + static_cast<uint32_t>(i);
  uint32_t* d;
  GT_CHECK(cudaMalloc(&d, kN * sizeof(uint32_t)));
  GT_CHECK(cudaMemcpy(d, host->data(), kN * sizeof(uint32_t), cudaMemcpyHostToDevice));
  return d;
}

int main() {
  SkipIfNoGpu("graph_two_streams");
  std::vector<uint32_t> ha, hb, hc;
  uint32_t* a = DeviceIota(&ha, 1);
  uint32_t* b = DeviceIota(&hb, 1000);
  uint32_t* c = DeviceIota(&hc, 50000);
  const dim3 grid(kN / 256), block(256);
  cudaStream_t sa, sa2, sb;
  GT_CHECK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
  GT_CHECK(cudaStreamCreateWithFlags(&sa2, cudaStreamNonBlocking));
  GT_CHECK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  GT_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  GT_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));

  cudaGraph_t ga, gb;
  GT_CHECK(cudaStreamBeginCapture(sa, cudaStreamCaptureModeThreadLocal));
  GT_CHECK(cudaEventRecord(fork, sa));
  GT_CHECK(cudaStreamWaitEvent(sa2, fork, 0));
  ts_left<<<grid, block, 0, sa>>>(a, kN);
  ts_right<<<grid, block, 0, sa2>>>(b, kN);
  GT_CHECK(cudaEventRecord(join, sa2));
  GT_CHECK(cudaStreamWaitEvent(sa, join, 0));
  ts_join<<<grid, block, 0, sa>>>(a, b, kN);
  GT_CHECK(cudaStreamEndCapture(sa, &ga));
  GT_CHECK(cudaStreamBeginCapture(sb, cudaStreamCaptureModeThreadLocal));
  ts_target<<<grid, block, 0, sb>>>(c, kN);
  ts_tail<<<grid, block, 0, sb>>>(c, kN);
  GT_CHECK(cudaStreamEndCapture(sb, &gb));
  cudaGraphExec_t ea, eb;
  GT_CHECK(cudaGraphInstantiate(&ea, ga, 0));
  GT_CHECK(cudaGraphInstantiate(&eb, gb, 0));
  GT_CHECK(cudaGraphDestroy(ga));
  GT_CHECK(cudaGraphDestroy(gb));

  auto run_a = [&] {
    std::vector<uint32_t> got(kN);
    for (int k = 1; k <= 40; ++k) {
      GT_CHECK(cudaGraphLaunch(ea, sa));
      GT_CHECK(cudaStreamSynchronize(sa));
      for (int i = 0; i < kN; ++i) {
        hb[i] = hb[i] * 5u + 2u;
        ha[i] = (ha[i] * 3u + 1u) ^ hb[i];
      }
      GT_CHECK(cudaMemcpyAsync(got.data(), a, kN * sizeof(uint32_t), cudaMemcpyDeviceToHost, sa));
      GT_CHECK(cudaStreamSynchronize(sa));
      for (int i = 0; i < kN; ++i) GT_EXPECT(got[i] == ha[i], "A launch %d: a[%d]", k, i);
    }
  };
  auto run_b = [&] {
    std::vector<uint32_t> got(kN);
    for (int k = 1; k <= 40; ++k) {
      GT_CHECK(cudaGraphLaunch(eb, sb));
      GT_CHECK(cudaStreamSynchronize(sb));
      for (int i = 0; i < kN; ++i) hc[i] = hc[i] * 7u + static_cast<uint32_t>(i) + 11u;
      GT_CHECK(cudaMemcpyAsync(got.data(), c, kN * sizeof(uint32_t), cudaMemcpyDeviceToHost, sb));
      GT_CHECK(cudaStreamSynchronize(sb));
      for (int i = 0; i < kN; ++i) GT_EXPECT(got[i] == hc[i], "B launch %d: c[%d]", k, i);
    }
  };
  std::thread ta(run_a), tb(run_b);
  ta.join();
  tb.join();
  GT_CHECK(cudaGraphExecDestroy(ea));
  GT_CHECK(cudaGraphExecDestroy(eb));
  std::printf("graph_two_streams: 2 threads x 40 graph launches (a fork/join graph and a chain) "
              "on 2 streams, c=%p checksum=%016llx OK\n", (void*)c,
              (unsigned long long)Checksum(hc.data(), kN * sizeof(uint32_t)));
  return 0;
}
