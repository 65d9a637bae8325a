// dispatch.h: turns a runtime (dtype, row length) into a compile-time
// (T, kBlock) instantiation.
#pragma once
#include <cuda_fp16.h>

#include <cstdio>
#include <cstdlib>

#include "kcsim/ops.h"

namespace kcsim {

template <typename Fn>
void DispatchType(DType t, Fn&& fn) {
  switch (t) {
    case DType::kF32: fn(float{}); break;
    case DType::kF16: fn(__half{}); break;
    case DType::kF64: fn(double{}); break;
    default: std::fprintf(stderr, "kcsim: bad dtype\n"); std::abort();
  }
}

template <int B> struct BlockSize { static constexpr int value = B; };

template <typename Fn>
void DispatchBlock(int64_t cols, Fn&& fn) {
  if (cols <= 128) fn(BlockSize<128>{});
  else if (cols <= 256) fn(BlockSize<256>{});
  else if (cols <= 512) fn(BlockSize<512>{});
  else fn(BlockSize<1024>{});
}

inline unsigned GridFor(int64_t n, int block) {
  return static_cast<unsigned>((n + block - 1) / block);
}

}  // namespace kcsim
