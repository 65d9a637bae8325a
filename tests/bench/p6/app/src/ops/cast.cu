// cast.cu: converts between the engine's data types.
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/reduce.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace {

template <typename T, typename U, int kBlock>
__global__ void CastKernel(const T* in, U* out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (i < n) out[i] = fn::Cast<U>::from(fn::ToFloat(in[i]));
}

}  // namespace

void Cast(const Buffer& in, const Buffer& out, cudaStream_t s) {
  DispatchType(in.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(in.cols, [&](auto b) {
      constexpr int kBlock = decltype(b)::value;
      DispatchType(out.dtype, [&](auto u) {
        using U = decltype(u);
        CastKernel<T, U, kBlock><<<GridFor(in.numel(), kBlock), kBlock, 0, s>>>(
            static_cast<const T*>(in.data), static_cast<U*>(out.data), in.numel());
      });
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
