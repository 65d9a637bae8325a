// scores.cu: causal attention scores, the kernel performance work focuses on.
// One thread per (head, query, key) element; every thread re-reads its query
// and key rows from global memory.
#include <cmath>

#include "kcsim/attention.h"
#include "kcsim/check.h"

namespace kcsim {

template <int kHeadDim>
__global__ void attention_scores_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                        float* __restrict__ scores, int heads, int tokens,
                                        float scale) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;  // key
  const int i = blockIdx.y;                             // query
  const int h = blockIdx.z;
  if (j >= tokens) return;
  float* out = scores + (static_cast<int64_t>(h) * tokens + i) * tokens;
  if (j > i) {
    out[j] = -INFINITY;
    return;
  }
  const int row = heads * kHeadDim;
  const float* qi = q + static_cast<int64_t>(i) * row + h * kHeadDim;
  const float* kj = k + static_cast<int64_t>(j) * row + h * kHeadDim;
  float acc = 0.f;
  for (int d = 0; d < kHeadDim; ++d) acc += qi[d] * kj[d];
  out[j] = acc * scale;
}

void AttentionScores(const float* q, const float* k, float* scores, const AttentionShape& shape,
                     float scale, cudaStream_t s) {
  const dim3 block(128);
  const dim3 grid((shape.tokens + block.x - 1) / block.x, shape.tokens, shape.heads);
  switch (shape.head_dim) {
    case 64:
      attention_scores_kernel<64><<<grid, block, 0, s>>>(q, k, scores, shape.heads, shape.tokens,
                                                         scale);
      break;
    case 128:
      attention_scores_kernel<128><<<grid, block, 0, s>>>(q, k, scores, shape.heads, shape.tokens,
                                                          scale);
      break;
    default:
      std::fprintf(stderr, "kcsim: unsupported head_dim %d\n", shape.head_dim);
      std::exit(2);
  }
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
