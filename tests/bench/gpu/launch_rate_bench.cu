// launch_rate_bench (P5): launch rate of small (empty) kernels. Run the same
// binary with and without the agent loaded (run_benchmarks.sh does, with
// kerncapd up and nothing armed) and compare the rates. Target >= 0.97.
//
// Usage: launch_rate_bench [--launches=1000000] [--label=NAME]
#include "bench_util.h"

using namespace kcbench;

__global__ void kc_bench_empty() {}

int main(int argc, char** argv) {
  RequireGpu("launch_rate_bench");
  const long n = std::atol(Arg(argc, argv, "launches", "1000000").c_str());
  const std::string label = Arg(argc, argv, "label", "run");
  for (int i = 0; i < 20000; ++i) kc_bench_empty<<<1, 32>>>();  // warm-up
  KB_CHECK(cudaDeviceSynchronize());
  const double t0 = Now();
  for (long i = 0; i < n; ++i) kc_bench_empty<<<1, 32>>>();
  KB_CHECK(cudaDeviceSynchronize());
  const double s = Now() - t0;
  KB_CHECK(cudaGetLastError());
  std::printf("%s: %ld launches in %.3f s = %.0f launches/s (%.3f us each)\n", label.c_str(), n, s,
              n / s, s / n * 1e6);
  std::printf("BENCH_JSON {\"bench\":\"p5_launch_rate\",\"label\":\"%s\",\"launches\":%ld,"
              "\"seconds\":%.4f,\"launches_per_second\":%.1f}\n",
              label.c_str(), n, s, n / s);
  return 0;
}
