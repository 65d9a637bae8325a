// launch_rate_bench (P5): launch rate of small (empty) kernels. Run the same
// binary with and without the agent loaded (run_benchmarks.sh does, with
// kerncapd up and nothing armed) and compare the rates. Target >= 0.97.
//
// --graph-nodes=N (P5g): the same empty kernel as the N nodes of a CUDA graph
// (stream capture, instantiated once), launched --launches/N times with
// cudaGraphLaunch: graph launches per second and kernel nodes per second.
// Unarmed, the agent's cuGraphLaunch callbacks are off like its other launch
// callbacks; only instantiation is tracked.
//
// Usage: launch_rate_bench [--launches=1000000] [--label=NAME] [--graph-nodes=0]
#include "bench_util.h"

using namespace kcbench;

__global__ void kc_bench_empty() {}

static int GraphLaunchRate(long kernels, int nodes, const std::string& label) {
  cudaStream_t s;
  KB_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g;
  KB_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < nodes; ++i) kc_bench_empty<<<1, 32, 0, s>>>();
  KB_CHECK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t exec;
  KB_CHECK(cudaGraphInstantiate(&exec, g, 0));
  KB_CHECK(cudaGraphDestroy(g));
  const long n = kernels / nodes;
  for (int i = 0; i < 2000; ++i) KB_CHECK(cudaGraphLaunch(exec, s));  // warm-up
  KB_CHECK(cudaStreamSynchronize(s));
  const double t0 = Now();
  for (long i = 0; i < n; ++i) cudaGraphLaunch(exec, s);
  KB_CHECK(cudaStreamSynchronize(s));
  const double sec = Now() - t0;
  KB_CHECK(cudaGetLastError());
  std::printf("%s: %ld graph launches (%d empty kernel nodes each) in %.3f s = %.0f graph launches/s "
              "(%.0f kernel nodes/s)\n",
              label.c_str(), n, nodes, sec, n / sec, n * nodes / sec);
  std::printf("BENCH_JSON {\"bench\":\"p5_graph_launch_rate\",\"label\":\"%s\",\"graph_launches\":%ld,"
              "\"nodes\":%d,\"seconds\":%.4f,\"graph_launches_per_second\":%.1f}\n",
              label.c_str(), n, nodes, sec, n / sec);
  KB_CHECK(cudaGraphExecDestroy(exec));
  return 0;
}

int main(int argc, char** argv) {
  RequireGpu("launch_rate_bench");
  const long n = std::atol(Arg(argc, argv, "launches", "1000000").c_str());
  const std::string label = Arg(argc, argv, "label", "run");
  const int graph_nodes = std::atoi(Arg(argc, argv, "graph-nodes", "0").c_str());
  if (graph_nodes > 0) return GraphLaunchRate(n, graph_nodes, label);
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
