// arg_max.cu: index of the largest element of every row (sampling).
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/reduce.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace {

template <typename T, int kBlock>
__global__ void ArgMaxKernel(const T* in, int32_t* out, int64_t cols) {
  __shared__ float best_v[kBlock];
  __shared__ int32_t best_i[kBlock];
  const T* row = in + blockIdx.x * cols;
  float bv = -3.0e38f;
  int32_t bi = 0;
  for (int64_t c = threadIdx.x; c < cols; c += kBlock) {
    const float v = fn::ToFloat(row[c]);
    if (v > bv) { bv = v; bi = static_cast<int32_t>(c); }
  }
  best_v[threadIdx.x] = bv;
  best_i[threadIdx.x] = bi;
  __syncthreads();
  for (int step = kBlock / 2; step > 0; step >>= 1) {
    if (threadIdx.x < step && best_v[threadIdx.x + step] > best_v[threadIdx.x]) {
      best_v[threadIdx.x] = best_v[threadIdx.x + step];
      best_i[threadIdx.x] = best_i[threadIdx.x + step];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = best_i[0];
}

}  // namespace

void ArgMax(const Buffer& in, int32_t* out, cudaStream_t s) {
  DispatchType(in.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(in.cols, [&](auto b) {
      constexpr int kBlock = decltype(b)::value;
      ArgMaxKernel<T, kBlock><<<static_cast<unsigned>(in.rows), kBlock, 0, s>>>(
          static_cast<const T*>(in.data), out, in.cols);
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
