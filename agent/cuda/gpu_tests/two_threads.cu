// two_threads: thread A launches "busy_writer" repeatedly on stream 1 while
// thread B launches "target_kernel" on stream 2. Capture target:
// "target_kernel" (3rd dispatch). While the agent snapshots, thread A's
// launches and copies must be held at the capture gate, so the snapshot is
// consistent and A's buffer never changes between pre image and kernel run.
#include <atomic>
#include <thread>
#include <vector>

#include "gpu_test_util.h"

__global__ void busy_writer(unsigned* buf, int n, unsigned tag) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) buf[i] = buf[i] * 1664525u + tag;
}

__global__ void target_kernel(const int* in, int* out, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * k + i;
}

int main() {
  SkipIfNoGpu("two_threads");
  const int n = 1 << 20;
  unsigned* dbusy;
  int *din, *dout;
  GT_CHECK(cudaMalloc(&dbusy, n * sizeof(unsigned)));
  GT_CHECK(cudaMalloc(&din, n * sizeof(int)));
  GT_CHECK(cudaMalloc(&dout, n * sizeof(int)));
  GT_CHECK(cudaMemset(dbusy, 0, n * sizeof(unsigned)));
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = i % 1000;
  GT_CHECK(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));

  std::atomic<bool> stop{false};
  std::atomic<long> busy_launches{0};
  std::thread a([&] {
    cudaStream_t s1;
    GT_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    unsigned tag = 0;
    while (!stop.load()) {
      busy_writer<<<(n + 255) / 256, 256, 0, s1>>>(dbusy, n, ++tag);
      GT_CHECK(cudaGetLastError());
      ++busy_launches;
      if (tag % 16 == 0) GT_CHECK(cudaStreamSynchronize(s1));
    }
    GT_CHECK(cudaStreamSynchronize(s1));
    GT_CHECK(cudaStreamDestroy(s1));
  });
  std::thread b([&] {
    cudaStream_t s2;
    GT_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    std::vector<int> out(n);
    for (int k = 1; k <= 5; ++k) {
      target_kernel<<<(n + 255) / 256, 256, 0, s2>>>(din, dout, n, k);
      GT_CHECK(cudaGetLastError());
      GT_CHECK(cudaMemcpyAsync(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost, s2));
      GT_CHECK(cudaStreamSynchronize(s2));
      for (int i = 0; i < n; ++i) GT_EXPECT(out[i] == in[i] * k + i, "k=%d out[%d]", k, i);
    }
    GT_CHECK(cudaStreamDestroy(s2));
  });
  b.join();
  stop = true;
  a.join();
  std::printf("two_threads: 5 target_kernel dispatches on stream 2 while thread A launched %ld "
              "busy_writer dispatches on stream 1 OK\n",
              busy_launches.load());
  return 0;
}
