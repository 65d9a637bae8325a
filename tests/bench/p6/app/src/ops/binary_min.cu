// binary_min.cu: out = Min(a, b) with row broadcasting of b (b.rows == 1).
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/reduce.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace {

template <typename T, bool kBroadcastRows, typename F>
__global__ void BinaryKernel(TensorView<const T, 2> a, TensorView<const T, 2> b,
                             TensorView<T, 2> out, F f) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t row = blockIdx.y;
  if (col >= out.shape[1]) return;
  out(row, col) = f(a(row, col), b(kBroadcastRows ? 0 : row, col));
}

template <typename T, int kBlock>
void LaunchBinary(const Buffer& a, const Buffer& b, const Buffer& out, cudaStream_t s) {
  const int64_t shape[2] = {a.rows, a.cols};
  const int64_t bshape[2] = {b.rows, b.cols};
  auto av = Contiguous(static_cast<const T*>(a.data), shape);
  auto bv = Contiguous(static_cast<const T*>(b.data), bshape);
  auto ov = Contiguous(static_cast<T*>(out.data), shape);
  dim3 grid(GridFor(a.cols, kBlock), static_cast<unsigned>(a.rows));
  if (b.rows == 1 && a.rows != 1) {
    BinaryKernel<T, true><<<grid, kBlock, 0, s>>>(av, bv, ov, fn::Min{});
  } else {
    BinaryKernel<T, false><<<grid, kBlock, 0, s>>>(av, bv, ov, fn::Min{});
  }
}

}  // namespace

void Min(const Buffer& a, const Buffer& b, const Buffer& out, cudaStream_t s) {
  DispatchType(a.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(a.cols, [&](auto blk) { LaunchBinary<T, decltype(blk)::value>(a, b, out, s); });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
