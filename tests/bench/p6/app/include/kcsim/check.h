// check.h: error handling shared by every translation unit.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define KCSIM_CHECK(expr)                                                              \
  do {                                                                                 \
    cudaError_t kcsim_err_ = (expr);                                                   \
    if (kcsim_err_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,               \
                   cudaGetErrorString(kcsim_err_));                                    \
      std::exit(2);                                                                    \
    }                                                                                  \
  } while (0)
