// ops.h: the engine's operator library. Every launcher dispatches on the
// buffer's data type and picks a block size from the row length, so each
// translation unit instantiates its kernels for every combination (as real
// operator libraries do).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace kcsim {

enum class DType { kF32, kF16, kF64 };

// A row-major matrix on the device.
struct Buffer {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t numel() const { return rows * cols; }
};

void Relu(const Buffer& in, const Buffer& out, cudaStream_t s);
void Gelu(const Buffer& in, const Buffer& out, cudaStream_t s);
void Silu(const Buffer& in, const Buffer& out, cudaStream_t s);
void Tanh(const Buffer& in, const Buffer& out, cudaStream_t s);
void Square(const Buffer& in, const Buffer& out, cudaStream_t s);
void Add(const Buffer& a, const Buffer& b, const Buffer& out, cudaStream_t s);
void Sub(const Buffer& a, const Buffer& b, const Buffer& out, cudaStream_t s);
void Mul(const Buffer& a, const Buffer& b, const Buffer& out, cudaStream_t s);
void Max(const Buffer& a, const Buffer& b, const Buffer& out, cudaStream_t s);
void Min(const Buffer& a, const Buffer& b, const Buffer& out, cudaStream_t s);
void RowSum(const Buffer& in, const Buffer& out, cudaStream_t s);
void RowMax(const Buffer& in, const Buffer& out, cudaStream_t s);
void Softmax(const Buffer& in, const Buffer& out, cudaStream_t s);
void LayerNorm(const Buffer& in, const Buffer& gamma, const Buffer& beta, const Buffer& out,
               cudaStream_t s);
void RmsNorm(const Buffer& in, const Buffer& gamma, const Buffer& out, cudaStream_t s);
void Rope(const Buffer& x, int64_t position0, cudaStream_t s);
void Embedding(const int32_t* tokens, int64_t n, const Buffer& table, const Buffer& out,
               cudaStream_t s);
void Transpose(const Buffer& in, const Buffer& out, cudaStream_t s);
void Gemv(const Buffer& w, const Buffer& x, const Buffer& y, cudaStream_t s);
// out = a (rows x k) * b (k x cols)
void MatMul(const Buffer& a, const Buffer& b, const Buffer& out, cudaStream_t s);
void Cast(const Buffer& in, const Buffer& out, cudaStream_t s);
void Fill(const Buffer& out, double value, cudaStream_t s);
void ScaleBias(const Buffer& x, double scale, double bias, cudaStream_t s);
void ArgMax(const Buffer& in, int32_t* out, cudaStream_t s);
void CumSum(const Buffer& in, const Buffer& out, cudaStream_t s);
void QuantizeInt8(const Buffer& in, int8_t* q, float* scales, cudaStream_t s);
void DequantizeInt8(const int8_t* q, const float* scales, const Buffer& out, cudaStream_t s);

}  // namespace kcsim
