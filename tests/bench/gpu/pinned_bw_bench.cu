// pinned_bw_bench: pinned host<->device copy bandwidth (the reference of P8,
// replay restore throughput, measured in the same run by run_benchmarks.sh).
//
// Usage: pinned_bw_bench [--gib=4] [--reps=3]   best of reps, 1 GiB copies
#include "bench_util.h"

using namespace kcbench;

int main(int argc, char** argv) {
  RequireGpu("pinned_bw_bench");
  const double gib = std::atof(Arg(argc, argv, "gib", "4").c_str());
  const int reps = std::atoi(Arg(argc, argv, "reps", "3").c_str());
  const uint64_t bytes = static_cast<uint64_t>(gib * (1ull << 30));
  const uint64_t piece = std::min<uint64_t>(bytes, 1ull << 30);
  void* host = nullptr;
  void* dev = nullptr;
  KB_CHECK(cudaMallocHost(&host, bytes));
  KB_CHECK(cudaMalloc(&dev, bytes));
  std::memset(host, 0x5a, bytes);
  double best_h2d = 0, best_d2h = 0;
  for (int r = 0; r < reps; ++r) {
    double t0 = Now();
    for (uint64_t o = 0; o < bytes; o += piece) {
      KB_CHECK(cudaMemcpy(static_cast<char*>(dev) + o, static_cast<char*>(host) + o, piece,
                          cudaMemcpyHostToDevice));
    }
    best_h2d = std::max(best_h2d, bytes / (Now() - t0) / 1e9);
    t0 = Now();
    for (uint64_t o = 0; o < bytes; o += piece) {
      KB_CHECK(cudaMemcpy(static_cast<char*>(host) + o, static_cast<char*>(dev) + o, piece,
                          cudaMemcpyDeviceToHost));
    }
    best_d2h = std::max(best_d2h, bytes / (Now() - t0) / 1e9);
  }
  std::printf("pinned copies of %.1f GiB, best of %d: H2D %.1f GB/s, D2H %.1f GB/s\n", gib, reps,
              best_h2d, best_d2h);
  std::printf("BENCH_JSON {\"bench\":\"pinned_bw\",\"bytes\":%llu,\"h2d_gbps\":%.2f,"
              "\"d2h_gbps\":%.2f}\n",
              static_cast<unsigned long long>(bytes), best_h2d, best_d2h);
  return 0;
}
