// bench_util.h: helpers shared by the GPU benchmarks (tests/bench/gpu). Each
// benchmark is a small CUDA application that prints its figures as a table
// line and one JSON line ("BENCH_JSON {...}"); without a GPU it prints
// "SKIP: ..." and exits 77.
#ifndef KERNCAP_TESTS_BENCH_GPU_BENCH_UTIL_H_
#define KERNCAP_TESTS_BENCH_GPU_BENCH_UTIL_H_

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "agent/cuda/gpu_tests/gpu_test_util.h"

namespace kcbench {

// Exit code 77, CUDA error checks and the "no usable GPU" skip are the GPU
// test programs' (one definition for tests and benchmarks).
using ::kSkipCode;
#define KB_CHECK(expr) GT_CHECK(expr)

inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Exits 77 with a clear message when there is no usable GPU; otherwise
// prints the device and its memory.
inline void RequireGpu(const char* program) {
  ::SkipIfNoGpu(program);
  cudaDeviceProp prop;
  KB_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s: %s, %.1f GiB\n", program, prop.name, prop.totalGlobalMem / 1073741824.0);
}

// "--name=value" argument, or fallback.
inline std::string Arg(int argc, char** argv, const char* name, const char* fallback) {
  std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return argv[i] + prefix.size();
  }
  return fallback;
}

// A field of /proc/<pid>/status in KiB ("VmHWM", "VmRSS", "RssShmem"...).
inline uint64_t ProcStatusKib(const std::string& pid, const char* field) {
  std::ifstream f("/proc/" + pid + "/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(f, line)) {
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':') {
      return std::strtoull(line.c_str() + n + 1, nullptr, 10);
    }
  }
  return 0;
}

// The agent's C API (agent/cuda/injection.cc), when the agent is loaded.
struct AgentCaptureInfo {
  uint64_t pre_bytes;
  uint64_t post_bytes;
  uint64_t regions;
  uint64_t ring_bytes;
  double quiesce_seconds;
  double pre_seconds;
  double post_seconds;
  double held_seconds;
};
using GetLastCaptureFn = int (*)(AgentCaptureInfo*);

inline GetLastCaptureFn FindAgentLastCapture() {
  // Under CUDA_INJECTION64_PATH the driver loads the agent privately; look it
  // up by path without loading it a second time.
  const char* path = std::getenv("CUDA_INJECTION64_PATH");
  void* h = path != nullptr ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  void* sym = h != nullptr ? dlsym(h, "kerncap_agent_get_last_capture")
                           : dlsym(RTLD_DEFAULT, "kerncap_agent_get_last_capture");
  return reinterpret_cast<GetLastCaptureFn>(sym);
}

// kerncap_agent_get_stats (agent/cuda/injection.cc), when the agent is loaded.
struct AgentStats {
  uint64_t tracked_allocations;
  uint64_t tracked_modules;
  uint64_t captures_committed;
  uint64_t captures_failed;
};
using GetStatsFn = int (*)(AgentStats*);

inline GetStatsFn FindAgentStats() {
  const char* path = std::getenv("CUDA_INJECTION64_PATH");
  void* h = path != nullptr ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  void* sym = h != nullptr ? dlsym(h, "kerncap_agent_get_stats")
                           : dlsym(RTLD_DEFAULT, "kerncap_agent_get_stats");
  return reinterpret_cast<GetStatsFn>(sym);
}

// Cheap integer hash (fills memory with values that neither dedup nor
// zero-skip nor compress).
__host__ __device__ inline uint32_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

}  // namespace kcbench

#endif  // KERNCAP_TESTS_BENCH_GPU_BENCH_UTIL_H_
