// cuda12_axpy: a CUDA 12 runtime application for the agent's GPU test
// (gpu_e2e_test's cuda12_* cases). Plain C++ built with g++ against the CUDA 12
// runtime of the nvidia-cuda-runtime-cu12 wheel and linked to its
// libcudart.so.12 (deploy/gpu/stage_cuda12.sh; the wheels carry no nvcc, so
// the kernel is a cubin the CUDA 12 ptxas assembled from kc12_axpy.ptx, loaded
// with cudaLibraryLoadData and launched with cudaLaunchKernel, all through
// the runtime).
//
// Runs kc12_axpy three times in place (y += a*x) and checks the result; the
// test arms the second launch. Prints "cudart 12xxx"; exits 77 without a GPU,
// 1 on a wrong result or a failed call.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

bool Ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "cuda12_axpy: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// The cubin beside the executable.
std::string CubinPath() {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "kc12_axpy.cubin";
  std::string p(self, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/') + 1) + "kc12_axpy.cubin";
}

}  // namespace

int main() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::printf("cudart %d, driver supports CUDA %d\n", runtime, driver);
  if (runtime / 1000 != 12) {
    std::fprintf(stderr, "cuda12_axpy: expected the CUDA 12 runtime, got %d\n", runtime);
    return 1;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\n");
    return 77;
  }
  std::ifstream in(CubinPath(), std::ios::binary);
  std::vector<char> cubin((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (cubin.empty()) {
    std::fprintf(stderr, "cuda12_axpy: cannot read %s\n", CubinPath().c_str());
    return 1;
  }
  cudaLibrary_t library = nullptr;
  cudaKernel_t kernel = nullptr;
  if (!Ok(cudaLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
          "cudaLibraryLoadData") ||
      !Ok(cudaLibraryGetKernel(&kernel, library, "kc12_axpy"), "cudaLibraryGetKernel")) {
    return 1;
  }
  constexpr unsigned n = 1u << 20;
  std::vector<float> x(n), y(n);
  for (unsigned i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 1000) * 0.5f;
    y[i] = static_cast<float>(i % 7);
  }
  float *dx = nullptr, *dy = nullptr;
  cudaStream_t stream = nullptr;
  if (!Ok(cudaMalloc(&dx, n * sizeof(float)), "cudaMalloc") ||
      !Ok(cudaMalloc(&dy, n * sizeof(float)), "cudaMalloc") ||
      !Ok(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy") ||
      !Ok(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy") ||
      !Ok(cudaStreamCreate(&stream), "cudaStreamCreate")) {
    return 1;
  }
  float a = 2.0f;
  unsigned count = n;
  void* args[] = {&dx, &dy, &a, &count};
  for (int launch = 0; launch < 3; ++launch) {
    if (!Ok(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(n / 256), dim3(256), args,
                             0, stream),
            "cudaLaunchKernel") ||
        !Ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize")) {
      return 1;
    }
  }
  std::vector<float> out(n);
  if (!Ok(cudaMemcpy(out.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy")) {
    return 1;
  }
  for (unsigned i = 0; i < n; ++i) {
    const float want = y[i] + 3 * a * x[i];
    if (std::fabs(out[i] - want) > 1e-3f * (1 + std::fabs(want))) {
      std::fprintf(stderr, "cuda12_axpy: y[%u] = %g, expected %g\n", i, out[i], want);
      return 1;
    }
  }
  std::printf("cuda12_axpy: ok, x=%p y=%p\n", static_cast<void*>(dx), static_cast<void*>(dy));
  cudaFree(dx);
  cudaFree(dy);
  cudaStreamDestroy(stream);
  cudaLibraryUnload(library);
  return 0;
}
