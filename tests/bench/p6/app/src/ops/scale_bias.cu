// scale_bias.cu: x = x * scale + bias, in place.
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/reduce.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace {

template <typename T, int kBlock>
__global__ void ScaleBiasKernel(T* x, int64_t n, float scale, float bias) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (i < n) x[i] = fn::Cast<T>::from(fn::ToFloat(x[i]) * scale + bias);
}

}  // namespace

void ScaleBias(const Buffer& in, double scale, double bias, cudaStream_t s) {
  DispatchType(in.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(in.cols, [&](auto b) {
      constexpr int kBlock = decltype(b)::value;
      ScaleBiasKernel<T, kBlock><<<GridFor(in.numel(), kBlock), kBlock, 0, s>>>(
          static_cast<T*>(in.data), in.numel(), static_cast<float>(scale), static_cast<float>(bias));
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
