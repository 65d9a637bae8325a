#include "tests/hsa_sim/host_kernels.h"

#include <cstring>

namespace kerncap::hsa_sim {

void RegisterTestKernels(SimRuntime& sim) {
  sim.RegisterKernel("vector_add", [](const DispatchContext& c) {
    auto* a = c.Arg<const float*>(0);
    auto* b = c.Arg<const float*>(1);
    auto* out = c.Arg<float*>(2);
    int n = c.Arg<int>(3);
    for (uint32_t i = 0; i < c.grid[0]; ++i) {
      if (static_cast<int>(i) < n) out[i] = a[i] + b[i];
    }
  });
  sim.RegisterKernel("scale_inplace", [](const DispatchContext& c) {
    auto* x = c.Arg<float*>(0);
    float s = c.Arg<float>(1);
    int n = c.Arg<int>(2);
    for (uint32_t i = 0; i < c.grid[0]; ++i) {
      if (static_cast<int>(i) < n) x[i] = x[i] * s;
    }
  });
  sim.RegisterKernel("sum_rows", [](const DispatchContext& c) {
    auto* rows = c.Arg<const float* const*>(0);
    auto* out = c.Arg<float*>(1);
    int rows_n = c.Arg<int>(2);
    int cols = c.Arg<int>(3);
    for (uint32_t r = 0; r < c.grid[0]; ++r) {
      if (static_cast<int>(r) >= rows_n) continue;
      float acc = 0;
      for (int k = 0; k < cols; ++k) acc += rows[r][k];
      out[r] = acc;
    }
  });
  sim.RegisterKernel("affine_const", [](const DispatchContext& c) {
    auto* x = c.Arg<const float*>(0);
    auto* y = c.Arg<float*>(1);
    int n = c.Arg<int>(2);
    auto* sb = reinterpret_cast<const float*>(c.variable("kc_scale_bias"));
    auto* counter = reinterpret_cast<int*>(c.variable("kc_device_counter"));
    for (uint32_t i = 0; i < c.grid[0]; ++i) {
      if (static_cast<int>(i) < n) y[i] = x[i] * sb[0] + sb[1];
    }
    if (counter != nullptr) ++*counter;
  });
  sim.RegisterKernel("_ZN2kc4fillIiEEvPT_S1_i", [](const DispatchContext& c) {
    auto* p = c.Arg<int*>(0);
    int v = c.Arg<int>(1);
    int n = c.Arg<int>(2);
    for (uint32_t i = 0; i < c.grid[0]; ++i) {
      if (static_cast<int>(i) < n) p[i] = v;
    }
  });
  // Its metadata lacks .kernarg_segment_size but still lists the arguments.
  sim.RegisterKernel("tensile_like", [](const DispatchContext& c) {
    auto* in = c.Arg<const float*>(0);
    auto* out = c.Arg<float*>(1);
    int n = c.Arg<int>(2);
    for (uint32_t i = 0; i < c.grid[0]; ++i) {
      if (static_cast<int>(i) < n) out[i] = in[i] * 2.0f + 1.0f;
    }
  });
}

}  // namespace kerncap::hsa_sim
