// cublas_gemm: one SGEMM through cuBLAS, a binary-only library whose kernel
// names are not known in advance (on Hopper e.g. "nvjet_*", "sm90_xmma_gemm_*"
// or "*sgemm*"). C = alpha*A*B + beta*C, in place on C, 512x512x512, with
// small-integer inputs so that every product and partial sum is exact in FP32
// (and in TF32), whatever order the kernel sums in. The program launches no
// kernel of its own, so the first kernel of the process whose name matches
// "gemm|nvjet|xmma" is cuBLAS's GEMM.
//
// libcublas.so.13 is loaded with dlopen (it is 50 MiB, plus a 500 MiB
// libcublasLt, so the GPU bundle does not carry it): from the library path,
// else from $KERNCAP_CUBLAS_DIR. Without it the program exits 77 (skip).
#include <cublas_v2.h>
#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gpu_test_util.h"

namespace {

using CreateFn = cublasStatus_t (*)(cublasHandle_t*);
using DestroyFn = cublasStatus_t (*)(cublasHandle_t);
using GetVersionFn = cublasStatus_t (*)(cublasHandle_t, int*);
using SgemmFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                   int, const float*, const float*, int, const float*, int,
                                   const float*, float*, int);

void* OpenCublas() {
  void* h = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
  if (h != nullptr) return h;
  std::string first = dlerror();
  const char* dir = std::getenv("KERNCAP_CUBLAS_DIR");
  if (dir != nullptr && *dir != '\0') {
    h = dlopen((std::string(dir) + "/libcublas.so.13").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) return h;
    first += std::string("; ") + dlerror();
  }
  std::printf("SKIP: cublas_gemm: no libcublas.so.13 (%s); set KERNCAP_CUBLAS_DIR\n",
              first.c_str());
  std::exit(kSkipCode);
}

template <typename Fn>
Fn Sym(void* h, const char* name) {
  void* p = dlsym(h, name);
  GT_EXPECT(p != nullptr, "libcublas.so.13 lacks %s", name);
  return reinterpret_cast<Fn>(p);
}

}  // namespace

int main() {
  SkipIfNoGpu("cublas_gemm");
  void* lib = OpenCublas();
  auto create = Sym<CreateFn>(lib, "cublasCreate_v2");
  auto destroy = Sym<DestroyFn>(lib, "cublasDestroy_v2");
  auto get_version = Sym<GetVersionFn>(lib, "cublasGetVersion_v2");
  auto sgemm = Sym<SgemmFn>(lib, "cublasSgemm_v2");

  constexpr int m = 512, n = 512, k = 512;
  std::vector<float> a(size_t{m} * k), b(size_t{k} * n), c(size_t{m} * n), expect(c.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i % 5) - 2);
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(i % 3);
  const float alpha = 2.0f, beta = 0.5f;
  // Column-major reference (exact: integers far below 2^24).
  for (size_t j = 0; j < size_t{n}; ++j) {
    for (size_t i = 0; i < size_t{m}; ++i) {
      float s = 0;
      for (size_t p = 0; p < size_t{k}; ++p) s += a[i + p * m] * b[p + j * k];
      expect[i + j * m] = alpha * s + beta * c[i + j * m];
    }
  }

  float *da, *db, *dc;
  GT_CHECK(cudaMalloc(&da, a.size() * sizeof(float)));
  GT_CHECK(cudaMalloc(&db, b.size() * sizeof(float)));
  GT_CHECK(cudaMalloc(&dc, c.size() * sizeof(float)));
  GT_CHECK(cudaMemcpy(da, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
  GT_CHECK(cudaMemcpy(db, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice));
  GT_CHECK(cudaMemcpy(dc, c.data(), c.size() * sizeof(float), cudaMemcpyHostToDevice));

  cublasHandle_t handle;
  GT_EXPECT(create(&handle) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
  int version = 0;
  get_version(handle, &version);
  GT_EXPECT(sgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da, m, db, k, &beta, dc, m) ==
                CUBLAS_STATUS_SUCCESS,
            "cublasSgemm failed");
  GT_CHECK(cudaDeviceSynchronize());
  GT_CHECK(cudaMemcpy(c.data(), dc, c.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < c.size(); ++i) {
    GT_EXPECT(c[i] == expect[i], "C[%zu]=%f expected %f", i, c[i], expect[i]);
  }
  destroy(handle);
  std::printf("cublas_gemm: cuBLAS %d, %dx%dx%d A=%p B=%p C=%p checksum(C)=%016llx OK\n", version,
              m, n, k, (void*)da, (void*)db, (void*)dc,
              (unsigned long long)Checksum(c.data(), c.size() * sizeof(float)));
  return 0;
}
