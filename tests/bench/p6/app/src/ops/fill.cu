// fill.cu: out[:] = value.
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/reduce.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace {

template <typename T, int kBlock>
__global__ void FillKernel(T* x, int64_t n, float value) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (i < n) x[i] = fn::Cast<T>::from(value);
}

}  // namespace

void Fill(const Buffer& in, double value, cudaStream_t s) {
  DispatchType(in.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(in.cols, [&](auto b) {
      constexpr int kBlock = decltype(b)::value;
      FillKernel<T, kBlock><<<GridFor(in.numel(), kBlock), kBlock, 0, s>>>(
          static_cast<T*>(in.data), in.numel(), static_cast<float>(value));
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
