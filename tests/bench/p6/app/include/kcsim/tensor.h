// tensor.h: strided tensor views used by host launchers and device kernels.
#pragma once
#include <cstdint>

namespace kcsim {

template <typename T, int Rank>
struct TensorView {
  T* data = nullptr;
  int64_t shape[Rank] = {};
  int64_t stride[Rank] = {};

  __host__ __device__ int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < Rank; ++i) n *= shape[i];
    return n;
  }
  template <typename... Idx>
  __host__ __device__ T& operator()(Idx... idx) const {
    static_assert(sizeof...(Idx) == Rank, "index count must match rank");
    const int64_t ids[] = {static_cast<int64_t>(idx)...};
    int64_t off = 0;
    for (int i = 0; i < Rank; ++i) off += ids[i] * stride[i];
    return data[off];
  }
};

template <typename T, int Rank>
TensorView<T, Rank> Contiguous(T* data, const int64_t (&shape)[Rank]) {
  TensorView<T, Rank> v;
  v.data = data;
  int64_t s = 1;
  for (int i = Rank - 1; i >= 0; --i) {
    v.shape[i] = shape[i];
    v.stride[i] = s;
    s *= shape[i];
  }
  return v;
}

}  // namespace kcsim
