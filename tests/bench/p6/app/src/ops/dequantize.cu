// dequantize.cu: int8 rows back to the buffer's type.
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/reduce.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace {

template <typename T, int kBlock>
__global__ void DequantizeKernel(const int8_t* q, const float* scales, T* out, int64_t cols) {
  for (int64_t c = threadIdx.x; c < cols; c += kBlock) {
    out[blockIdx.x * cols + c] = fn::Cast<T>::from(q[blockIdx.x * cols + c] * scales[blockIdx.x]);
  }
}

}  // namespace

void DequantizeInt8(const int8_t* q, const float* scales, const Buffer& in, cudaStream_t s) {
  DispatchType(in.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(in.cols, [&](auto b) {
      constexpr int kBlock = decltype(b)::value;
      DequantizeKernel<T, kBlock><<<static_cast<unsigned>(in.rows), kBlock, 0, s>>>(
          q, scales, static_cast<T*>(in.data), in.cols);
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
