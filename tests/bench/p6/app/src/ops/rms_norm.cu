// rms_norm.cu: row RMS normalization with gain.
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/reduce.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace {

template <typename T, int kBlock>
__global__ void RmsNormKernel(const T* in, const T* gamma, T* out, int64_t cols) {
  const T* row = in + blockIdx.x * cols;
  float sq = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += kBlock) sq += fn::Square{}(fn::ToFloat(row[c]));
  sq = BlockReduce<kBlock>(sq, fn::Add{}, 0.f);
  const float inv = rsqrtf(sq / cols + 1e-6f);
  for (int64_t c = threadIdx.x; c < cols; c += kBlock) {
    out[blockIdx.x * cols + c] = fn::Cast<T>::from(fn::ToFloat(row[c]) * inv * fn::ToFloat(gamma[c]));
  }
}

}  // namespace

void RmsNorm(const Buffer& in, const Buffer& gamma, const Buffer& out, cudaStream_t s) {
  DispatchType(in.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(in.cols, [&](auto b) {
      constexpr int kBlock = decltype(b)::value;
      RmsNormKernel<T, kBlock><<<static_cast<unsigned>(in.rows), kBlock, 0, s>>>(
          static_cast<const T*>(in.data), static_cast<const T*>(gamma.data),
          static_cast<T*>(out.data), in.cols);
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
