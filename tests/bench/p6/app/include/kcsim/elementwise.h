// elementwise.h: the element-wise kernel templates every unary and binary op
// unit instantiates with its own functor (one unit per op, as operator
// libraries are laid out, so each op's kernels compile on their own).
#pragma once
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace elementwise {

template <typename T, int kVec, typename F>
__global__ void UnaryKernel(const T* __restrict__ in, T* __restrict__ out, int64_t n, F f) {
  const int64_t base = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kVec;
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    if (base + v < n) out[base + v] = f(in[base + v]);
  }
}

// out = F(in) for every data type and block size, vectorized by 4 when the
// size allows.
template <typename F>
void Unary(const Buffer& in, const Buffer& out, cudaStream_t s) {
  DispatchType(in.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(in.cols, [&](auto b) {
      constexpr int kBlock = decltype(b)::value;
      const int64_t n = in.numel();
      if (n % 4 == 0) {
        UnaryKernel<T, 4><<<GridFor((n + 3) / 4, kBlock), kBlock, 0, s>>>(
            static_cast<const T*>(in.data), static_cast<T*>(out.data), n, F{});
      } else {
        UnaryKernel<T, 1><<<GridFor(n, kBlock), kBlock, 0, s>>>(
            static_cast<const T*>(in.data), static_cast<T*>(out.data), n, F{});
      }
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

template <typename T, bool kBroadcastRows, typename F>
__global__ void BinaryKernel(TensorView<const T, 2> a, TensorView<const T, 2> b,
                             TensorView<T, 2> out, F f) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t row = blockIdx.y;
  if (col >= out.shape[1]) return;
  out(row, col) = f(a(row, col), b(kBroadcastRows ? 0 : row, col));
}

// out = F(a, b), b broadcast over rows when it has one row.
template <typename F>
void Binary(const Buffer& a, const Buffer& b, const Buffer& out, cudaStream_t s) {
  DispatchType(a.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(a.cols, [&](auto blk) {
      constexpr int kBlock = decltype(blk)::value;
      const int64_t shape[2] = {a.rows, a.cols};
      const int64_t bshape[2] = {b.rows, b.cols};
      auto av = Contiguous(static_cast<const T*>(a.data), shape);
      auto bv = Contiguous(static_cast<const T*>(b.data), bshape);
      auto ov = Contiguous(static_cast<T*>(out.data), shape);
      dim3 grid(GridFor(a.cols, kBlock), static_cast<unsigned>(a.rows));
      if (b.rows == 1 && a.rows != 1) {
        BinaryKernel<T, true><<<grid, kBlock, 0, s>>>(av, bv, ov, F{});
      } else {
        BinaryKernel<T, false><<<grid, kBlock, 0, s>>>(av, bv, ov, F{});
      }
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace elementwise
}  // namespace kcsim
