// mat_mul.cu: out = a * b with square shared-memory tiles (tile picked from the width).
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/reduce.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace {

template <typename T, int kTile>
__global__ void MatMulKernel(const T* a, const T* b, T* out, int64_t m, int64_t k, int64_t n) {
  __shared__ float as[kTile][kTile + 1];
  __shared__ float bs[kTile][kTile + 1];
  const int64_t row = blockIdx.y * kTile + threadIdx.y, col = blockIdx.x * kTile + threadIdx.x;
  float acc = 0.f;
  for (int64_t t = 0; t < k; t += kTile) {
    as[threadIdx.y][threadIdx.x] = row < m && t + threadIdx.x < k ? fn::ToFloat(a[row * k + t + threadIdx.x]) : 0.f;
    bs[threadIdx.y][threadIdx.x] = col < n && t + threadIdx.y < k ? fn::ToFloat(b[(t + threadIdx.y) * n + col]) : 0.f;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kTile; ++i) acc += as[threadIdx.y][i] * bs[i][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) out[row * n + col] = fn::Cast<T>::from(acc);
}

}  // namespace

void MatMul(const Buffer& in, const Buffer& b, const Buffer& out, cudaStream_t s) {
  DispatchType(in.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(in.cols, [&](auto blk) {
      constexpr int kBlock = decltype(blk)::value;
      constexpr int kTile = kBlock >= 512 ? 32 : 16;
      dim3 grid(GridFor(b.cols, kTile), GridFor(in.rows, kTile));
      MatMulKernel<T, kTile><<<grid, dim3(kTile, kTile), 0, s>>>(
          static_cast<const T*>(in.data), static_cast<const T*>(b.data), static_cast<T*>(out.data),
          in.rows, in.cols, b.cols);
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
