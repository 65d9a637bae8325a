// embedding.cu: gathers one table row per token.
#include "kcsim/check.h"
#include "kcsim/dispatch.h"
#include "kcsim/functors.h"
#include "kcsim/ops.h"
#include "kcsim/reduce.h"
#include "kcsim/tensor.h"

namespace kcsim {
namespace {

template <typename T, int kBlock>
__global__ void EmbeddingKernel(const int32_t* tokens, const T* table, T* out, int64_t cols) {
  const T* src = table + static_cast<int64_t>(tokens[blockIdx.x]) * cols;
  for (int64_t c = threadIdx.x; c < cols; c += kBlock) out[blockIdx.x * cols + c] = src[c];
}

}  // namespace

void Embedding(const int32_t* tokens, int64_t n, const Buffer& in, const Buffer& out, cudaStream_t s) {
  DispatchType(in.dtype, [&](auto t) {
    using T = decltype(t);
    DispatchBlock(in.cols, [&](auto b) {
      constexpr int kBlock = decltype(b)::value;
      EmbeddingKernel<T, kBlock><<<static_cast<unsigned>(n), kBlock, 0, s>>>(
          tokens, static_cast<const T*>(in.data), static_cast<T*>(out.data), in.cols);
    });
  });
  KCSIM_CHECK(cudaGetLastError());
}

}  // namespace kcsim
