// attention.h: multi-head attention building blocks.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace kcsim {

struct AttentionShape {
  int heads = 16;
  int tokens = 512;
  int head_dim = 64;
};

// scores[h][i][j] = scale * dot(q[i][h*D..], k[j][h*D..]) for j <= i, -inf
// above the diagonal (causal). q, k: tokens x (heads * head_dim) row-major;
// scores: heads x tokens x tokens.
void AttentionScores(const float* q, const float* k, float* scores, const AttentionShape& shape,
                     float scale, cudaStream_t s);
// out[i][h*D + d] = sum_j probs[h][i][j] * v[j][h*D + d]
void AttentionApply(const float* probs, const float* v, float* out, const AttentionShape& shape,
                    cudaStream_t s);

}  // namespace kcsim
