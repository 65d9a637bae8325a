// functors.h: element-wise math as composable functor templates; every op
// family instantiates its kernels over these.
#pragma once
#include <cuda_fp16.h>

#include <cmath>

namespace kcsim {
namespace fn {

template <typename T>
struct Cast {
  template <typename U>
  __host__ __device__ static T from(U v) { return static_cast<T>(v); }
};
template <>
struct Cast<__half> {
  template <typename U>
  __host__ __device__ static __half from(U v) { return __float2half(static_cast<float>(v)); }
};

template <typename T>
__host__ __device__ inline float ToFloat(T v) { return static_cast<float>(v); }
template <>
__host__ __device__ inline float ToFloat<__half>(__half v) { return __half2float(v); }

struct Identity { template <typename T> __device__ T operator()(T x) const { return x; } };
struct Relu {
  template <typename T> __device__ T operator()(T x) const {
    return ToFloat(x) > 0.f ? x : Cast<T>::from(0.f);
  }
};
struct Gelu {
  template <typename T> __device__ T operator()(T x) const {
    const float v = ToFloat(x);
    return Cast<T>::from(0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))));
  }
};
struct Silu {
  template <typename T> __device__ T operator()(T x) const {
    const float v = ToFloat(x);
    return Cast<T>::from(v / (1.f + expf(-v)));
  }
};
struct Tanh {
  template <typename T> __device__ T operator()(T x) const { return Cast<T>::from(tanhf(ToFloat(x))); }
};
struct Square {
  template <typename T> __device__ T operator()(T x) const {
    return Cast<T>::from(ToFloat(x) * ToFloat(x));
  }
};

struct Add { template <typename T> __device__ T operator()(T a, T b) const { return Cast<T>::from(ToFloat(a) + ToFloat(b)); } };
struct Sub { template <typename T> __device__ T operator()(T a, T b) const { return Cast<T>::from(ToFloat(a) - ToFloat(b)); } };
struct Mul { template <typename T> __device__ T operator()(T a, T b) const { return Cast<T>::from(ToFloat(a) * ToFloat(b)); } };
struct Max { template <typename T> __device__ T operator()(T a, T b) const { return ToFloat(a) > ToFloat(b) ? a : b; } };
struct Min { template <typename T> __device__ T operator()(T a, T b) const { return ToFloat(a) < ToFloat(b) ? a : b; } };

// f(g(x)): fused activations are compositions.
template <typename F, typename G>
struct Compose {
  F f;
  G g;
  template <typename T> __device__ T operator()(T x) const { return f(g(x)); }
};

}  // namespace fn
}  // namespace kcsim
