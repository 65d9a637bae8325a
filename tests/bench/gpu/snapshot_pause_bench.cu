// snapshot_pause_bench (P1-default, P2): the application's pause
// for a capture of --gib GiB of live memory whose kernel writes 1% of it,
// with kerncapd at its default settings, first and second capture of the
// same process. Measured in the same run:
//   baseline_live: pinned D2H of the live bytes once (1 GiB copies through a
//                  1 GiB cudaMallocHost buffer)
//   capture 1:     wall time of the captured launch call (P1-default)
//   capture 2:     the same kernel captured again after capture 1 committed
//                  (P2: the store already holds every unchanged chunk)
// The "no free HBM" case of P1-default is the same run with the agent told
// to keep more device memory free than the device has
// (KERNCAP_AGENT_SNAPSHOT_MARGIN_MIB=10000000: the snapshot never fits, the
// agent takes the host path; --host-path=1 only labels the figures). Its
// target compares with the pinned D2H of pre + changed bytes.
// The capture path, drain time and PCIe bytes come from the manifest
// (kerncapctl show --json: agent_timing); run_benchmarks.sh joins them.
//
// Usage: snapshot_pause_bench --gib=24 --arm-cmd='kerncapctl ... arm --kernel=kc_snap_touch'
//        [--host-path=0] [--second=1] [--ring-wait-s=180]
#include <unistd.h>

#include <thread>
#include <vector>

#include "bench_util.h"

using namespace kcbench;

__global__ void kc_snap_fill(uint32_t* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    p[i] = Mix(seed + i);
  }
}

// The captured kernel: rewrites every 100th MiB of the buffer (1% of it,
// spread over the whole buffer): `touch` words in all, of the buffer's `words`.
__global__ void kc_snap_touch(uint32_t* p, uint64_t touch, uint64_t words) {
  const uint64_t per_mib = (1ull << 20) / 4;
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < touch;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const uint64_t w = (i / per_mib) * 100 * per_mib + i % per_mib;
    if (w < words) p[w] = p[w] * 2654435761u + 1;
  }
}

__global__ void kc_snap_other() {}

namespace {

// Waits until the agent counted `n` captures (committed or failed).
bool WaitSettled(GetStatsFn stats_fn, uint64_t n, double timeout_s) {
  const double t0 = Now();
  AgentStats s{};
  while (stats_fn != nullptr && Now() - t0 < timeout_s) {
    stats_fn(&s);
    if (s.captures_committed + s.captures_failed >= n) return s.captures_failed == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  RequireGpu("snapshot_pause_bench");
  const double gib = std::atof(Arg(argc, argv, "gib", "24").c_str());
  const std::string arm_cmd = Arg(argc, argv, "arm-cmd", "");
  const bool host_path = Arg(argc, argv, "host-path", "0") == "1";
  const bool second = Arg(argc, argv, "second", "1") == "1";
  const int ring_wait_s = std::atoi(Arg(argc, argv, "ring-wait-s", "180").c_str());
  const uint64_t total = static_cast<uint64_t>(gib * (1ull << 30)) & ~((1ull << 20) - 1);

  double t0 = Now();
  uint32_t* live = nullptr;
  KB_CHECK(cudaMalloc(&live, total));
  kc_snap_fill<<<4096, 256>>>(live, total / 4, 12345);
  KB_CHECK(cudaDeviceSynchronize());
  kc_snap_touch<<<1, 1>>>(live, 0, 0);  // loads the module
  KB_CHECK(cudaDeviceSynchronize());
  std::printf("allocated and filled %.2f GiB (%.2f s)\n", total / 1073741824.0, Now() - t0);

  // Baseline: pinned D2H of the live bytes once.
  const uint64_t pin_bytes = 1ull << 30;
  void* pinned = nullptr;
  KB_CHECK(cudaMallocHost(&pinned, pin_bytes));
  KB_CHECK(cudaMemcpy(pinned, live, pin_bytes, cudaMemcpyDeviceToHost));
  t0 = Now();
  for (uint64_t off = 0; off < total; off += pin_bytes) {
    KB_CHECK(cudaMemcpy(pinned, reinterpret_cast<char*>(live) + off,
                        std::min(pin_bytes, total - off), cudaMemcpyDeviceToHost));
  }
  const double base_live_s = Now() - t0;
  KB_CHECK(cudaFreeHost(pinned));  // freed before arming: it would be a captured region
  const double d2h_gbps = total / base_live_s / 1e9;
  std::printf("baseline: pinned D2H of the %.2f GiB live in %.3f s = %.1f GB/s\n",
              total / 1073741824.0, base_live_s, d2h_gbps);

  GetLastCaptureFn last = FindAgentLastCapture();
  GetStatsFn stats_fn = FindAgentStats();
  if (arm_cmd.empty() || last == nullptr) {
    std::printf("no agent loaded or no --arm-cmd: baseline only\n");
    return 0;
  }
  double pause[2] = {0, 0};
  AgentCaptureInfo info[2]{};
  const int captures = second ? 2 : 1;
  for (int c = 0; c < captures; ++c) {
    std::printf("arming (capture %d): %s\n", c + 1, arm_cmd.c_str());
    if (std::system(arm_cmd.c_str()) != 0) {
      std::fprintf(stderr, "FAIL: the arm command failed\n");
      return 1;
    }
    t0 = Now();
    AgentCaptureInfo ring{};
    while (Now() - t0 < ring_wait_s) {
      last(&ring);
      if (ring.ring_bytes > 0) break;
      kc_snap_other<<<1, 1>>>();
      KB_CHECK(cudaDeviceSynchronize());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kc_snap_other<<<1, 1>>>();
    KB_CHECK(cudaDeviceSynchronize());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    t0 = Now();
    kc_snap_touch<<<4096, 256>>>(live, total / 4 / 100, total / 4);
    pause[c] = Now() - t0;
    KB_CHECK(cudaDeviceSynchronize());
    // The drain runs after the release; the next capture (and the figures)
    // wait for the daemon's verdict.
    const bool ok = WaitSettled(stats_fn, c + 1, 600);
    last(&info[c]);
    std::printf("capture %d: launch call %.3f s (agent held %.3f s: quiesce %.3f, pre %.3f, post "
                "%.3f); %.2f GiB pre, %.3f GiB post sent; %s\n",
                c + 1, pause[c], info[c].held_seconds, info[c].quiesce_seconds,
                info[c].pre_seconds, info[c].post_seconds, info[c].pre_bytes / 1073741824.0,
                info[c].post_bytes / 1073741824.0, ok ? "committed" : "FAILED or timed out");
    if (!ok) return 1;
  }
  const uint64_t changed = info[0].post_bytes;
  const double base_pre_changed_s =
      base_live_s * static_cast<double>(info[0].pre_bytes + changed) / static_cast<double>(total);
  std::printf(
      "BENCH_JSON {\"bench\":\"p1_default\",\"gib\":%.2f,\"host_path_forced\":%s,\"live_bytes\":%llu,"
      "\"baseline_live_seconds\":%.4f,\"baseline_pre_changed_seconds\":%.4f,\"d2h_gbps\":%.2f,"
      "\"pause_seconds\":%.4f,\"agent_held_seconds\":%.4f,\"quiesce_seconds\":%.4f,"
      "\"pre_seconds\":%.4f,\"post_seconds\":%.4f,\"pre_bytes\":%llu,\"post_bytes\":%llu,"
      "\"ratio_vs_live_d2h\":%.4f,\"ratio_vs_pre_changed_d2h\":%.4f,\"app_vmhwm_kib\":%llu,"
      "\"pid\":%d}\n",
      gib, host_path ? "true" : "false", static_cast<unsigned long long>(total), base_live_s,
      base_pre_changed_s, d2h_gbps, pause[0], info[0].held_seconds, info[0].quiesce_seconds,
      info[0].pre_seconds, info[0].post_seconds,
      static_cast<unsigned long long>(info[0].pre_bytes),
      static_cast<unsigned long long>(info[0].post_bytes), pause[0] / base_live_s,
      pause[0] / base_pre_changed_s,
      static_cast<unsigned long long>(ProcStatusKib("self", "VmHWM")), static_cast<int>(::getpid()));
  if (second) {
    std::printf(
        "BENCH_JSON {\"bench\":\"p2_second_capture\",\"gib\":%.2f,\"first_pause_seconds\":%.4f,"
        "\"pause_seconds\":%.4f,\"agent_held_seconds\":%.4f,\"pre_bytes\":%llu,"
        "\"post_bytes\":%llu,\"ratio_vs_first\":%.4f,\"target\":0.05}\n",
        gib, pause[0], pause[1], info[1].held_seconds,
        static_cast<unsigned long long>(info[1].pre_bytes),
        static_cast<unsigned long long>(info[1].post_bytes), pause[1] / pause[0]);
  }
  return 0;
}
