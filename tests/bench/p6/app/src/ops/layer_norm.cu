// layer_norm.cu: row layer normalization with gain and bias.
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/reduce.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace {

template <typename T, int kBlock>
__global__ void LayerNormKernel(const T* in, const T* gamma, const T* beta, T* out, int64_t cols) {
  const T* row = in + blockIdx.x * cols;
  float sum = 0.f, sq = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += kBlock) {
    const float v = fn::ToFloat(row[c]);
    sum += v;
    sq += v * v;
  }
  sum = BlockReduce<kBlock>(sum, fn::Add{}, 0.f);
  sq = BlockReduce<kBlock>(sq, fn::Add{}, 0.f);
  const float mean = sum / cols, inv = rsqrtf(sq / cols - mean * mean + 1e-5f);
  for (int64_t c = threadIdx.x; c < cols; c += kBlock) {
    out[blockIdx.x * cols + c] = fn::Cast<T>::from((fn::ToFloat(row[c]) - mean) * inv *
                                                   fn::ToFloat(gamma[c]) + fn::ToFloat(beta[c]));
  }
}

}  // namespace

void LayerNorm(const Buffer& in, const Buffer& gamma, const Buffer& beta, const Buffer& out,
               cudaStream_t s) {
  DispatchType(in.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(in.cols, [&](auto b) {
      constexpr int kBlock = decltype(b)::value;
      LayerNormKernel<T, kBlock><<<static_cast<unsigned>(in.rows), kBlock, 0, s>>>(
          static_cast<const T*>(in.data), static_cast<const T*>(gamma.data),
          static_cast<const T*>(beta.data), static_cast<T*>(out.data), in.cols);
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
