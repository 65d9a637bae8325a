// cum_sum.cu: inclusive prefix sum of every row (one warp per row, chunked).
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/reduce.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace {

template <typename T, int kBlock>
__global__ void CumSumKernel(const T* in, T* out, int64_t cols) {
  // kBlock only selects the chunking; one warp scans each row.
  const T* row = in + blockIdx.x * cols;
  T* orow = out + blockIdx.x * cols;
  const int lane = threadIdx.x % 32;
  if (threadIdx.x >= 32) return;
  float carry = 0.f;
  for (int64_t base = 0; base < cols; base += 32) {
    float v = base + lane < cols ? fn::ToFloat(row[base + lane]) : 0.f;
    for (int off = 1; off < 32; off <<= 1) {
      const float n = __shfl_up_sync(0xffffffffu, v, off);
      if (lane >= off) v += n;
    }
    if (base + lane < cols) orow[base + lane] = fn::Cast<T>::from(v + carry);
    carry += __shfl_sync(0xffffffffu, v, 31);
  }
  (void)kBlock;
}

}  // namespace

void CumSum(const Buffer& in, const Buffer& out, cudaStream_t s) {
  DispatchType(in.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(in.cols, [&](auto b) {
      constexpr int kBlock = decltype(b)::value;
      CumSumKernel<T, kBlock><<<static_cast<unsigned>(in.rows), 32, 0, s>>>(
          static_cast<const T*>(in.data), static_cast<T*>(out.data), in.cols);
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
