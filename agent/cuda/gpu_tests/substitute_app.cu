// substitute_app: the application live substitution is tried on. It
// launches kc_scale_add (out = a * in + b, elementwise) again and again and
// checks every result itself; it exits 0 only if every check passed, so a
// substituted variant that computed anything else would fail it.
//
//   substitute_app [ITERATIONS] [STOP_FILE]
//
// Runs ITERATIONS launches (default 50), or with STOP_FILE until that file
// exists (at most 600 s), one launch every ~1 ms. The kernel is extern "C" so
// a variant built separately (substitute/variant.cu) has the same name.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu_test_util.h"

extern "C" __global__ void kc_scale_add(float* out, const float* in, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * in[i] + b;
}

int main(int argc, char** argv) {
  SkipIfNoGpu("substitute_app");
  const long iterations = argc > 1 ? std::atol(argv[1]) : 50;
  const std::string stop_file = argc > 2 ? argv[2] : "";
  const int n = 1 << 16;
  std::vector<float> in(n), out(n);
  for (int i = 0; i < n; ++i) in[i] = 0.25f * static_cast<float>(i % 1024);
  float *din, *dout;
  GT_CHECK(cudaMalloc(&din, n * sizeof(float)));
  GT_CHECK(cudaMalloc(&dout, n * sizeof(float)));
  GT_CHECK(cudaMemcpy(din, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const auto start = std::chrono::steady_clock::now();
  long done = 0;
  for (long it = 0;; ++it) {
    if (stop_file.empty() ? it >= iterations : access(stop_file.c_str(), F_OK) == 0) break;
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(600)) break;
    // a and b change per iteration: a stale or wrong output cannot pass.
    const float a = 1.0f + static_cast<float>(it % 7);
    const float b = static_cast<float>(it % 13);
    GT_CHECK(cudaMemset(dout, 0xff, n * sizeof(float)));
    kc_scale_add<<<(n + 255) / 256, 256>>>(dout, din, a, b, n);
    GT_CHECK(cudaGetLastError());
    GT_CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) {
      GT_EXPECT(out[i] == a * in[i] + b, "iteration %ld: out[%d]=%f, expected %f", it, i, out[i],
                a * in[i] + b);
    }
    ++done;
    usleep(1000);
  }
  std::printf("substitute_app: %ld launches of kc_scale_add, every result checked OK\n", done);
  return 0;
}
