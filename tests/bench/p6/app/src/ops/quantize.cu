// quantize.cu: per-row symmetric int8 quantization (KV-cache compression).
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/reduce.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace {

template <typename T, int kBlock>
__global__ void QuantizeKernel(const T* in, int8_t* q, float* scales, int64_t cols) {
  const T* row = in + blockIdx.x * cols;
  float amax = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += kBlock) amax = fmaxf(amax, fabsf(fn::ToFloat(row[c])));
  amax = BlockReduce<kBlock>(amax, fn::Max{}, 0.f);
  const float scale = amax > 0.f ? amax / 127.f : 1.f;
  if (threadIdx.x == 0) scales[blockIdx.x] = scale;
  for (int64_t c = threadIdx.x; c < cols; c += kBlock) {
    q[blockIdx.x * cols + c] = static_cast<int8_t>(rintf(fn::ToFloat(row[c]) / scale));
  }
}

}  // namespace

void QuantizeInt8(const Buffer& in, int8_t* q, float* scales, cudaStream_t s) {
  DispatchType(in.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(in.cols, [&](auto b) {
      constexpr int kBlock = decltype(b)::value;
      QuantizeKernel<T, kBlock><<<static_cast<unsigned>(in.rows), kBlock, 0, s>>>(
          static_cast<const T*>(in.data), q, scales, in.cols);
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
