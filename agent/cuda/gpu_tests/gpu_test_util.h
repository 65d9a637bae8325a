// gpu_test_util.h: shared helpers of the GPU test programs. Each program is a
// small CUDA application that the end-to-end GPU test runs under the agent
// (CUDA_INJECTION64_PATH=libkerncap_agent.so) with kerncapd armed, then
// replays and validates the captured dispatch. Run alone, it checks its own
// results on the GPU and prints what it did; with no GPU or driver it prints
// "SKIP: ..." and exits with kSkipCode (ctest SKIP_RETURN_CODE).
#ifndef KERNCAP_AGENT_CUDA_GPU_TESTS_GPU_TEST_UTIL_H_
#define KERNCAP_AGENT_CUDA_GPU_TESTS_GPU_TEST_UTIL_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

inline constexpr int kSkipCode = 77;

#define GT_CHECK(expr)                                                             \
  do {                                                                             \
    cudaError_t _e = (expr);                                                       \
    if (_e != cudaSuccess) {                                                       \
      std::fprintf(stderr, "FAIL: %s:%d: %s: %s\n", __FILE__, __LINE__, #expr,     \
                   cudaGetErrorString(_e));                                        \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

#define GT_EXPECT(cond, ...)                                  \
  do {                                                        \
    if (!(cond)) {                                            \
      std::fprintf(stderr, "FAIL: %s:%d: ", __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                      \
      std::fprintf(stderr, "\n");                             \
      std::exit(1);                                           \
    }                                                         \
  } while (0)

// Exits with kSkipCode when there is no usable GPU (no driver, no device, or
// a device older than sm_90, which these programs are built for).
inline void SkipIfNoGpu(const char* program) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::printf("SKIP: %s: no CUDA device/driver (%s)\n", program,
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    std::exit(kSkipCode);
  }
  cudaDeviceProp prop;
  GT_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major < 9) {
    std::printf("SKIP: %s: device %s is sm_%d%d; built for sm_90\n", program, prop.name,
                prop.major, prop.minor);
    std::exit(kSkipCode);
  }
  std::printf("%s: running on %s (%d device(s))\n", program, prop.name, n);
}

// Order-dependent checksum of a host buffer (FNV-1a), printed so a replay's
// output can be compared with the live run by eye.
inline uint64_t Checksum(const void* data, size_t size) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

#endif  // KERNCAP_AGENT_CUDA_GPU_TESTS_GPU_TEST_UTIL_H_
