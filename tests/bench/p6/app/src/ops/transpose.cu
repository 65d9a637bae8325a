// transpose.cu: out = in^T through 32x32 shared-memory tiles.
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/reduce.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace {

template <typename T, int kBlock>
__global__ void TransposeKernel(const T* in, T* out, int64_t rows, int64_t cols) {
  __shared__ T tile[32][33];
  const int64_t c = blockIdx.x * 32 + threadIdx.x;
  for (int k = threadIdx.y; k < 32; k += kBlock / 32) {
    const int64_t r = blockIdx.y * 32 + k;
    if (r < rows && c < cols) tile[k][threadIdx.x] = in[r * cols + c];
  }
  __syncthreads();
  const int64_t oc = blockIdx.y * 32 + threadIdx.x;
  for (int k = threadIdx.y; k < 32; k += kBlock / 32) {
    const int64_t orow = blockIdx.x * 32 + k;
    if (orow < cols && oc < rows) out[orow * rows + oc] = tile[threadIdx.x][k];
  }
}

}  // namespace

void Transpose(const Buffer& in, const Buffer& out, cudaStream_t s) {
  DispatchType(in.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(in.cols, [&](auto b) {
      constexpr int kBlock = decltype(b)::value;
      dim3 grid(GridFor(in.cols, 32), GridFor(in.rows, 32));
      TransposeKernel<T, kBlock><<<grid, dim3(32, kBlock / 32), 0, s>>>(
          static_cast<const T*>(in.data), static_cast<T*>(out.data), in.rows, in.cols);
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
