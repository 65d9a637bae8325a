// reduce.h: warp and block reductions (shuffle based), templated on the
// combining functor and block size.
#pragma once
#include "kcsim/functors.h"

namespace kcsim {

template <typename Op>
__device__ float WarpReduce(float v, Op op) {
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

template <int kBlock, typename Op>
__device__ float BlockReduce(float v, Op op, float identity) {
  static_assert(kBlock % 32 == 0 && kBlock <= 1024, "block must be whole warps");
  __shared__ float partial[kBlock / 32];
  v = WarpReduce(v, op);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = threadIdx.x < kBlock / 32 ? partial[lane] : identity;
  if (warp == 0) v = WarpReduce(v, op);
  __syncthreads();
  return v;
}

}  // namespace kcsim
