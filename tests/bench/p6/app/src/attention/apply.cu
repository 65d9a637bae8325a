// apply.cu: attention output = probabilities x values, per head.
#include "kcsim/attention.h"
#include "kcsim/check.h"

namespace kcsim {
namespace {

template <int kHeadDim>
__global__ void AttentionApplyKernel(const float* probs, const float* v, float* out, int heads,
                                     int tokens) {
  const int d = threadIdx.x;  // one thread per output feature of the head
  const int i = blockIdx.x;
  const int h = blockIdx.y;
  const float* p = probs + (static_cast<int64_t>(h) * tokens + i) * tokens;
  const int row = heads * kHeadDim;
  float acc = 0.f;
  for (int j = 0; j <= i; ++j) acc += p[j] * v[static_cast<int64_t>(j) * row + h * kHeadDim + d];
  out[static_cast<int64_t>(i) * row + h * kHeadDim + d] = acc;
}

}  // namespace

void AttentionApply(const float* probs, const float* v, float* out, const AttentionShape& shape,
                    cudaStream_t s) {
  const dim3 grid(shape.tokens, shape.heads);
  if (shape.head_dim == 64) {
    AttentionApplyKernel<64><<<grid, 64, 0, s>>>(probs, v, out, shape.heads, shape.tokens);
  } else {
    AttentionApplyKernel<128><<<grid, 128, 0, s>>>(probs, v, out, shape.heads, shape.tokens);
  }
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
