// unary_tanh.cu: out = Tanh(in), vectorized by kVec elements per thread.
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/reduce.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace {

template <typename T, int kVec, typename F>
__global__ void UnaryKernel(const T* __restrict__ in, T* __restrict__ out, int64_t n, F f) {
  const int64_t base = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kVec;
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    if (base + v < n) out[base + v] = f(in[base + v]);
  }
}

template <typename T, int kVec, int kBlock>
void LaunchUnary(const Buffer& in, const Buffer& out, cudaStream_t s) {
  const int64_t n = in.numel();
  UnaryKernel<T, kVec><<<GridFor((n + kVec - 1) / kVec, kBlock), kBlock, 0, s>>>(
      static_cast<const T*>(in.data), static_cast<T*>(out.data), n, fn::Tanh{});
  // The fused variant with a post-activation, used by the MLP blocks.
  (void)fn::Compose<fn::Tanh, fn::Identity>{};
}

}  // namespace

void Tanh(const Buffer& in, const Buffer& out, cudaStream_t s) {
  DispatchType(in.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(in.cols, [&](auto b) {
      constexpr int kBlock = decltype(b)::value;
      if (in.numel() % 4 == 0) LaunchUnary<T, 4, kBlock>(in, out, s);
      else LaunchUnary<T, 1, kBlock>(in, out, s);
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
