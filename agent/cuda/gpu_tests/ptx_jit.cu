// ptx_jit: a module JIT-compiled by the driver at run time from a PTX string
// (cuModuleLoadData), with a `.global` variable written through
// cuModuleGetGlobal between launches. The kernel updates y in place:
// y = a*x + y + jit_bias. Launched twice with a different bias; capture
// target: "jit_saxpy", 2nd dispatch (its pre-state holds the 1st's output and
// the 2nd bias). The driver entry points come from the runtime
// (cudaGetDriverEntryPointByVersion), so the program needs no libcuda at link
// time and skips cleanly without a driver.
#include <cuda.h>

#include <cmath>
#include <vector>

#include "gpu_test_util.h"

namespace {

constexpr char kPtx[] = R"(
.version 7.8
.target sm_90
.address_size 64

.visible .global .align 4 .f32 jit_bias;

.visible .entry jit_saxpy(.param .f32 a, .param .u64 x, .param .u64 y, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .f32 %f<6>;
  .reg .b64 %rd<8>;
  ld.param.f32 %f1, [a];
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [y];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd3, %rd1;
  cvta.to.global.u64 %rd4, %rd2;
  mul.wide.u32 %rd5, %r5, 4;
  add.s64 %rd6, %rd3, %rd5;
  add.s64 %rd7, %rd4, %rd5;
  ld.global.f32 %f2, [%rd6];
  ld.global.f32 %f3, [%rd7];
  ld.global.f32 %f4, [jit_bias];
  fma.rn.f32 %f5, %f1, %f2, %f3;
  add.rn.f32 %f5, %f5, %f4;
  st.global.f32 [%rd7], %f5;
DONE:
  ret;
}
)";

using ModuleLoadDataFn = CUresult (*)(CUmodule*, const void*);
using ModuleGetFunctionFn = CUresult (*)(CUfunction*, CUmodule, const char*);
using ModuleGetGlobalFn = CUresult (*)(CUdeviceptr*, size_t*, CUmodule, const char*);
using MemcpyHtoDFn = CUresult (*)(CUdeviceptr, const void*, size_t);
using LaunchKernelFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, CUstream, void**, void**);

template <typename Fn>
Fn Driver(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q;
  GT_CHECK(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q));
  GT_EXPECT(q == cudaDriverEntryPointSuccess && p != nullptr, "driver entry point %s not found",
            name);
  return reinterpret_cast<Fn>(p);
}

#define CU_CHECK(expr)                                                                   \
  do {                                                                                   \
    CUresult _r = (expr);                                                                \
    GT_EXPECT(_r == CUDA_SUCCESS, "%s failed: CUresult %d", #expr, static_cast<int>(_r)); \
  } while (0)

}  // namespace

int main() {
  SkipIfNoGpu("ptx_jit");
  GT_CHECK(cudaFree(nullptr));  // primary context current on this thread
  auto module_load_data = Driver<ModuleLoadDataFn>("cuModuleLoadData");
  auto module_get_function = Driver<ModuleGetFunctionFn>("cuModuleGetFunction");
  auto module_get_global = Driver<ModuleGetGlobalFn>("cuModuleGetGlobal");
  auto memcpy_htod = Driver<MemcpyHtoDFn>("cuMemcpyHtoD");
  auto launch_kernel = Driver<LaunchKernelFn>("cuLaunchKernel");

  CUmodule module;
  CU_CHECK(module_load_data(&module, kPtx));  // JIT: PTX -> SASS in the driver
  CUfunction f;
  CU_CHECK(module_get_function(&f, module, "jit_saxpy"));
  CUdeviceptr bias_ptr = 0;
  size_t bias_size = 0;
  CU_CHECK(module_get_global(&bias_ptr, &bias_size, module, "jit_bias"));
  GT_EXPECT(bias_size == sizeof(float), "jit_bias is %zu bytes", bias_size);

  const unsigned n = 1 << 18;
  std::vector<float> x(n), y(n), expect(n);
  for (unsigned i = 0; i < n; ++i) {
    x[i] = 0.25f * static_cast<float>(i % 1000);
    y[i] = 1.0f - 0.125f * static_cast<float>(i % 77);
  }
  float *dx, *dy;
  GT_CHECK(cudaMalloc(&dx, n * sizeof(float)));
  GT_CHECK(cudaMalloc(&dy, n * sizeof(float)));
  GT_CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  GT_CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));

  expect = y;
  const float scales[2] = {2.0f, 0.5f};
  const float biases[2] = {0.25f, 1.5f};
  for (int launch = 0; launch < 2; ++launch) {
    CU_CHECK(memcpy_htod(bias_ptr, &biases[launch], sizeof(float)));
    float a = scales[launch];
    CUdeviceptr px = reinterpret_cast<CUdeviceptr>(dx), py = reinterpret_cast<CUdeviceptr>(dy);
    unsigned nn = n;
    void* args[] = {&a, &px, &py, &nn};
    CU_CHECK(launch_kernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
    for (unsigned i = 0; i < n; ++i) expect[i] = std::fmaf(a, x[i], expect[i]) + biases[launch];
  }
  GT_CHECK(cudaDeviceSynchronize());
  GT_CHECK(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (unsigned i = 0; i < n; ++i) {
    GT_EXPECT(y[i] == expect[i], "y[%u]=%f expected %f", i, y[i], expect[i]);
  }
  std::printf("ptx_jit: n=%u x=%p y=%p jit_bias=0x%llx checksum(y)=%016llx OK\n", n, (void*)dx,
              (void*)dy, (unsigned long long)bias_ptr,
              (unsigned long long)Checksum(y.data(), n * sizeof(float)));
  return 0;
}
