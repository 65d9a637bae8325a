// row_sum.cu: out[r] = sum of row r (one block per row).
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/reduce.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace {

template <typename T, int kBlock>
__global__ void RowReduceKernel(const T* in, T* out, int64_t cols) {
  const T* row = in + blockIdx.x * cols;
  float acc = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += kBlock) acc += fn::ToFloat(row[c]);
  acc = BlockReduce<kBlock>(acc, fn::Add{}, 0.f);
  if (threadIdx.x == 0) out[blockIdx.x] = fn::Cast<T>::from(acc);
}

}  // namespace

void RowSum(const Buffer& in, const Buffer& out, cudaStream_t s) {
  DispatchType(in.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(in.cols, [&](auto b) {
      constexpr int kBlock = decltype(b)::value;
      RowReduceKernel<T, kBlock><<<static_cast<unsigned>(in.rows), kBlock, 0, s>>>(
          static_cast<const T*>(in.data), static_cast<T*>(out.data), in.cols);
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
