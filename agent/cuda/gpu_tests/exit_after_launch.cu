// exit_after_launch: the captured launch is the program's last GPU work
// before it ends, with a buffer large enough (256 MiB) that the capture's
// device snapshot is still draining when the program starts to exit. The
// agent must hold the exit (and a cudaDeviceReset) until the drain is done:
// the program's result is checked, it exits 0, and the capture validates.
// Capture target: kernel "touch_few" (1st dispatch).
// EXIT_MODE=reset: cudaDeviceReset() right after reading the result.
#include <cstring>
#include <vector>

#include "gpu_test_util.h"

__global__ void touch_few(unsigned* data, size_t n, unsigned add) {
  const size_t i = (blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x) * 4099;
  if (i < n) data[i] += add;
}

__global__ void fill(unsigned* data, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    data[i] = static_cast<unsigned>(i * 2654435761u);
  }
}

int main() {
  SkipIfNoGpu("exit_after_launch");
  const size_t n = (256ull << 20) / sizeof(unsigned);
  unsigned* d = nullptr;
  GT_CHECK(cudaMalloc(&d, n * sizeof(unsigned)));
  fill<<<1024, 256>>>(d, n);
  GT_CHECK(cudaDeviceSynchronize());
  const unsigned threads = 256, blocks = static_cast<unsigned>((n / 4099 + threads) / threads);
  touch_few<<<blocks, threads>>>(d, n, 7);
  GT_CHECK(cudaGetLastError());
  unsigned first[2] = {0, 0};
  GT_CHECK(cudaMemcpy(&first[0], d, sizeof(unsigned), cudaMemcpyDeviceToHost));
  GT_CHECK(cudaMemcpy(&first[1], d + 4099, sizeof(unsigned), cudaMemcpyDeviceToHost));
  GT_EXPECT(first[0] == 7u && first[1] == static_cast<unsigned>(4099ull * 2654435761u) + 7u,
            "first=%u,%u", first[0], first[1]);
  const char* mode = std::getenv("EXIT_MODE");
  const bool reset = mode != nullptr && std::strcmp(mode, "reset") == 0;
  std::printf("exit_after_launch: n=%zu data=%p mode=%s OK\n", n, static_cast<void*>(d),
              reset ? "reset" : "return");
  std::fflush(stdout);
  if (reset) GT_CHECK(cudaDeviceReset());
  return 0;  // d is never freed: the runtime's exit teardown is what is tested
}
