// capture_pause_bench (P1): how long does a capture hold the application?
//
// Allocates --gib GiB of device memory in 256 MiB buffers and fills it with
// hashed values (no zeros, no duplicates, incompressible: dedup and zero-skip
// cannot hide any byte). Measures, in the same run:
//   baseline: pinned device-to-host copy of 2 x the allocated bytes (the
//             pre-dispatch image and the post-dispatch image: the agent
//             copies every live byte before the kernel and again after it),
//             through a 1 GiB cudaMallocHost buffer, 1 GiB copies;
//   capture:  --arm-cmd arms kerncapd for kc_bench_touch; after the agent's
//             capture ring is ready, one launch of kc_bench_touch is timed
//             (wall time of the launch call: the agent holds the application
//             inside it for quiesce + pre image + kernel + post image).
// ratio = launch-call time / (baseline time scaled to the agent's pre+post
// bytes). Target <= 1.25. Also prints the agent's own gate-hold time and the
// process's peak RSS (VmHWM).
//
// --also-graph=1 (P1g): then, with the same state, the same kc_bench_touch as
// the middle node of a CUDA graph (2 empty kernel nodes, the kernel, 2 more),
// armed again with --arm-cmd once the first capture is committed; the
// cudaGraphLaunch call is timed (the agent runs the graph node by node and
// captures the node) and compared with the direct launch.
//
// Usage: capture_pause_bench --gib=8 --arm-cmd='kerncapctl ... arm kc_bench_touch'
//        [--ring-wait-s=180] [--also-graph=0]
// Without the agent (no CUDA_INJECTION64_PATH) only the baseline is printed.
#include <unistd.h>

#include <thread>
#include <vector>

#include "bench_util.h"

using namespace kcbench;

__global__ void kc_bench_fill(uint32_t* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    p[i] = Mix(seed + i);
  }
}

// The captured kernel: rewrites 1 MiB of the first buffer.
__global__ void kc_bench_touch(uint32_t* p, uint64_t n) {
  uint64_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * 2654435761u + 1;
}

__global__ void kc_bench_other() {}

int main(int argc, char** argv) {
  RequireGpu("capture_pause_bench");
  const double gib = std::atof(Arg(argc, argv, "gib", "8").c_str());
  const std::string arm_cmd = Arg(argc, argv, "arm-cmd", "");
  const int ring_wait_s = std::atoi(Arg(argc, argv, "ring-wait-s", "180").c_str());
  const bool also_graph = Arg(argc, argv, "also-graph", "0") == "1";
  const uint64_t total = static_cast<uint64_t>(gib * (1ull << 30));
  const uint64_t buf_bytes = 256ull << 20;

  double t0 = Now();
  std::vector<uint32_t*> bufs;
  for (uint64_t done = 0; done < total; done += buf_bytes) {
    uint32_t* p = nullptr;
    KB_CHECK(cudaMalloc(&p, buf_bytes));
    kc_bench_fill<<<1024, 256>>>(p, buf_bytes / 4, done * 977);
    bufs.push_back(p);
  }
  KB_CHECK(cudaDeviceSynchronize());
  const uint64_t allocated = bufs.size() * buf_bytes;
  std::printf("allocated and filled %.2f GiB in %zu buffers (%.2f s)\n", allocated / 1073741824.0,
              bufs.size(), Now() - t0);
  // Load the captured kernel's module before the measurement.
  kc_bench_touch<<<1, 1>>>(bufs[0], 0);
  KB_CHECK(cudaDeviceSynchronize());
  // The graph of the P1g measurement, instantiated before any arm.
  cudaStream_t gs;
  KB_CHECK(cudaStreamCreateWithFlags(&gs, cudaStreamNonBlocking));
  cudaGraph_t graph;
  KB_CHECK(cudaStreamBeginCapture(gs, cudaStreamCaptureModeThreadLocal));
  kc_bench_other<<<1, 1, 0, gs>>>();
  kc_bench_other<<<1, 1, 0, gs>>>();
  kc_bench_touch<<<(1 << 18) / 256, 256, 0, gs>>>(bufs[0], 1 << 18);
  kc_bench_other<<<1, 1, 0, gs>>>();
  kc_bench_other<<<1, 1, 0, gs>>>();
  KB_CHECK(cudaStreamEndCapture(gs, &graph));
  cudaGraphExec_t graph_exec;
  KB_CHECK(cudaGraphInstantiate(&graph_exec, graph, 0));
  KB_CHECK(cudaGraphDestroy(graph));

  // Baseline: pinned D2H of pre + post bytes.
  const uint64_t pin_bytes = std::min<uint64_t>(1ull << 30, buf_bytes * 4);
  void* pinned = nullptr;
  KB_CHECK(cudaMallocHost(&pinned, pin_bytes));
  // Touch the pinned pages once so the first copy is not penalized.
  KB_CHECK(cudaMemcpy(pinned, bufs[0], buf_bytes, cudaMemcpyDeviceToHost));
  t0 = Now();
  uint64_t base_bytes = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < bufs.size(); ++i) {
      char* dst = static_cast<char*>(pinned) + (i * buf_bytes) % pin_bytes;
      KB_CHECK(cudaMemcpy(dst, bufs[i], buf_bytes, cudaMemcpyDeviceToHost));
      base_bytes += buf_bytes;
    }
  }
  const double base_s = Now() - t0;
  const double d2h_gbps = base_bytes / base_s / 1e9;
  // Freed before arming: pinned host memory is a captured region otherwise.
  KB_CHECK(cudaFreeHost(pinned));
  std::printf("baseline: pinned D2H of %.2f GiB (pre + post = 2 x allocated) in %.3f s = %.1f GB/s\n",
              base_bytes / 1073741824.0, base_s, d2h_gbps);

  GetLastCaptureFn last = FindAgentLastCapture();
  if (arm_cmd.empty() || last == nullptr) {
    std::printf("no agent loaded or no --arm-cmd: baseline only\n");
    std::printf("BENCH_JSON {\"bench\":\"p1_capture_pause\",\"gib\":%.2f,\"baseline_bytes\":%llu,"
                "\"baseline_seconds\":%.4f,\"d2h_gbps\":%.2f,\"captured\":false}\n",
                gib, static_cast<unsigned long long>(base_bytes), base_s, d2h_gbps);
    return 0;
  }

  std::printf("arming: %s\n", arm_cmd.c_str());
  if (std::system(arm_cmd.c_str()) != 0) {
    std::fprintf(stderr, "FAIL: the arm command failed\n");
    return 1;
  }
  // The agent asks for its ring when the arm arrives; creating and
  // registering a large ring takes seconds, before any capture.
  t0 = Now();
  AgentCaptureInfo info{};
  while (Now() - t0 < ring_wait_s) {
    last(&info);
    if (info.ring_bytes > 0) break;
    kc_bench_other<<<1, 1>>>();  // the application keeps running meanwhile
    KB_CHECK(cudaDeviceSynchronize());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double ring_wait = Now() - t0;
  if (info.ring_bytes == 0) {
    std::printf("warning: the agent's ring was not registered after %.1f s; capturing anyway\n",
                ring_wait);
  } else {
    std::printf("agent ring ready: %.2f GiB after %.2f s\n", info.ring_bytes / 1073741824.0,
                ring_wait);
  }
  kc_bench_other<<<1, 1>>>();
  KB_CHECK(cudaDeviceSynchronize());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));

  t0 = Now();
  kc_bench_touch<<<(1 << 18) / 256, 256>>>(bufs[0], 1 << 18);  // 1 MiB of 4-byte words
  const double launch_s = Now() - t0;
  KB_CHECK(cudaDeviceSynchronize());
  last(&info);
  const uint64_t captured = info.pre_bytes + info.post_bytes;
  if (captured == 0) {
    std::fprintf(stderr, "FAIL: the launch was not captured (see the agent's log)\n");
    return 1;
  }
  const double expected_s = base_s * static_cast<double>(captured) / static_cast<double>(base_bytes);
  const double ratio = launch_s / expected_s;
  const uint64_t hwm = ProcStatusKib("self", "VmHWM");
  const uint64_t anon = ProcStatusKib("self", "RssAnon");
  const uint64_t shmem = ProcStatusKib("self", "RssShmem");
  std::printf(
      "capture: %.2f GiB pre + %.2f GiB post in %llu regions; launch call %.3f s (agent gate held "
      "%.3f s: quiesce %.3f, pre %.3f, post %.3f); pinned D2H of the same bytes %.3f s; ratio "
      "%.3f (target <= 1.25)\n",
      info.pre_bytes / 1073741824.0, info.post_bytes / 1073741824.0,
      static_cast<unsigned long long>(info.regions), launch_s, info.held_seconds,
      info.quiesce_seconds, info.pre_seconds, info.post_seconds, expected_s, ratio);
  std::printf("application memory: VmHWM %.2f GiB (RssAnon %.2f GiB, RssShmem %.2f GiB = mapped ring)\n",
              hwm / 1048576.0, anon / 1048576.0, shmem / 1048576.0);
  std::printf(
      "BENCH_JSON {\"bench\":\"p1_capture_pause\",\"gib\":%.2f,\"pre_bytes\":%llu,\"post_bytes\":%llu,"
      "\"regions\":%llu,\"ring_bytes\":%llu,\"launch_call_seconds\":%.4f,\"agent_held_seconds\":%.4f,"
      "\"quiesce_seconds\":%.4f,\"pre_seconds\":%.4f,\"post_seconds\":%.4f,\"baseline_bytes\":%llu,"
      "\"baseline_seconds\":%.4f,\"d2h_gbps\":%.2f,\"baseline_seconds_same_bytes\":%.4f,"
      "\"ratio\":%.4f,\"target\":1.25,\"app_vmhwm_kib\":%llu,\"app_rss_anon_kib\":%llu,"
      "\"app_rss_shmem_kib\":%llu,\"pid\":%d}\n",
      gib, static_cast<unsigned long long>(info.pre_bytes),
      static_cast<unsigned long long>(info.post_bytes),
      static_cast<unsigned long long>(info.regions),
      static_cast<unsigned long long>(info.ring_bytes), launch_s, info.held_seconds,
      info.quiesce_seconds, info.pre_seconds, info.post_seconds,
      static_cast<unsigned long long>(base_bytes), base_s, d2h_gbps, expected_s, ratio,
      static_cast<unsigned long long>(hwm), static_cast<unsigned long long>(anon),
      static_cast<unsigned long long>(shmem), static_cast<int>(::getpid()));
  if (also_graph) {
    // The first capture must be committed: the agent's next capture would
    // otherwise wait for that verdict inside the timed call.
    GetStatsFn stats_fn = FindAgentStats();
    AgentStats stats{};
    t0 = Now();
    while (stats_fn != nullptr && Now() - t0 < 300) {
      stats_fn(&stats);
      if (stats.captures_committed + stats.captures_failed >= 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::printf("graph: first capture settled after %.1f s; arming again: %s\n", Now() - t0,
                arm_cmd.c_str());
    if (std::system(arm_cmd.c_str()) != 0) {
      std::fprintf(stderr, "FAIL: the second arm command failed\n");
      return 1;
    }
    kc_bench_other<<<1, 1>>>();
    KB_CHECK(cudaDeviceSynchronize());
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    AgentCaptureInfo before = info;
    t0 = Now();
    KB_CHECK(cudaGraphLaunch(graph_exec, gs));
    const double graph_s = Now() - t0;
    KB_CHECK(cudaStreamSynchronize(gs));
    last(&info);
    if (info.held_seconds == before.held_seconds && info.pre_bytes == before.pre_bytes) {
      std::fprintf(stderr, "FAIL: the graph launch was not captured (see the agent's log)\n");
      return 1;
    }
    std::printf("graph capture: kc_bench_touch as node 3 of 5: graph launch call %.3f s (agent "
                "gate held %.3f s) vs direct launch call %.3f s: ratio %.3f\n",
                graph_s, info.held_seconds, launch_s, graph_s / launch_s);
    std::printf("BENCH_JSON {\"bench\":\"p1_graph_capture_pause\",\"gib\":%.2f,\"graph_nodes\":5,"
                "\"graph_launch_call_seconds\":%.4f,\"direct_launch_call_seconds\":%.4f,"
                "\"ratio_to_direct\":%.4f,\"agent_held_seconds\":%.4f,\"pre_bytes\":%llu,"
                "\"post_bytes\":%llu}\n",
                gib, graph_s, launch_s, graph_s / launch_s, info.held_seconds,
                static_cast<unsigned long long>(info.pre_bytes),
                static_cast<unsigned long long>(info.post_bytes));
  }
  KB_CHECK(cudaGraphExecDestroy(graph_exec));
  for (uint32_t* p : bufs) KB_CHECK(cudaFree(p));
  return 0;
}
