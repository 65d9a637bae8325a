// gemv.cu: y = W x (one block per output row).
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/reduce.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace {

template <typename T, int kBlock>
__global__ void GemvKernel(const T* w, const T* x, T* y, int64_t cols) {
  const T* row = w + blockIdx.x * cols;
  float acc = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += kBlock) acc += fn::ToFloat(row[c]) * fn::ToFloat(x[c]);
  acc = BlockReduce<kBlock>(acc, fn::Add{}, 0.f);
  if (threadIdx.x == 0) y[blockIdx.x] = fn::Cast<T>::from(acc);
}

}  // namespace

void Gemv(const Buffer& in, const Buffer& x, const Buffer& y, cudaStream_t s) {
  DispatchType(in.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(in.cols, [&](auto b) {
      constexpr int kBlock = decltype(b)::value;
      GemvKernel<T, kBlock><<<static_cast<unsigned>(in.rows), kBlock, 0, s>>>(
          static_cast<const T*>(in.data), static_cast<const T*>(x.data), static_cast<T*>(y.data),
          in.cols);
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
