// softmax.cu: numerically stable row softmax.
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/reduce.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace {

template <typename T, int kBlock>
__global__ void SoftmaxKernel(const T* in, T* out, int64_t cols) {
  const T* row = in + blockIdx.x * cols;
  T* orow = out + blockIdx.x * cols;
  float m = -3.0e38f;
  for (int64_t c = threadIdx.x; c < cols; c += kBlock) m = fmaxf(m, fn::ToFloat(row[c]));
  m = BlockReduce<kBlock>(m, fn::Max{}, -3.0e38f);
  float sum = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += kBlock) sum += expf(fn::ToFloat(row[c]) - m);
  sum = BlockReduce<kBlock>(sum, fn::Add{}, 0.f);
  for (int64_t c = threadIdx.x; c < cols; c += kBlock) {
    orow[c] = fn::Cast<T>::from(expf(fn::ToFloat(row[c]) - m) / sum);
  }
}

}  // namespace

void Softmax(const Buffer& in, const Buffer& out, cudaStream_t s) {
  DispatchType(in.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(in.cols, [&](auto b) {
      constexpr int kBlock = decltype(b)::value;
      SoftmaxKernel<T, kBlock><<<static_cast<unsigned>(in.rows), kBlock, 0, s>>>(
          static_cast<const T*>(in.data), static_cast<T*>(out.data), in.cols);
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
