// rope.cu: rotary position embedding applied in place (pairs of columns).
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/reduce.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace {

template <typename T, int kBlock>
__global__ void RopeKernel(T* x, int64_t cols, int64_t position0) {
  const int64_t pos = position0 + blockIdx.x;
  T* row = x + blockIdx.x * cols;
  for (int64_t c = 2 * threadIdx.x; c + 1 < cols; c += 2 * kBlock) {
    const float theta = pos * powf(10000.f, -static_cast<float>(c) / cols);
    const float cs = cosf(theta), sn = sinf(theta);
    const float a = fn::ToFloat(row[c]), b = fn::ToFloat(row[c + 1]);
    row[c] = fn::Cast<T>::from(a * cs - b * sn);
    row[c + 1] = fn::Cast<T>::from(a * sn + b * cs);
  }
}

}  // namespace

void Rope(const Buffer& in, int64_t position0, cudaStream_t s) {
  DispatchType(in.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(in.cols, [&](auto b) {
      constexpr int kBlock = decltype(b)::value;
      RopeKernel<T, kBlock><<<static_cast<unsigned>(in.rows), kBlock, 0, s>>>(
          static_cast<T*>(in.data), in.cols, position0);
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
