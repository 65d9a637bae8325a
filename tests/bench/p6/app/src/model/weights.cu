// weights.cu: synthetic checkpoint "loading": every tensor is generated on the
// host from a seeded generator (scaled like a trained model's) and uploaded.
#include <cmath>
#include <random>
#include <vector>

#include "kcsim/check.h"
#include "kcsim/model.h"

namespace kcsim {
namespace {

void Upload(Buffer& b, std::mt19937_64& rng, float stddev, float mean = 0.f) {
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> host(static_cast<size_t>(b.numel()));
  for (float& v : host) v = dist(rng);
  KCSIM_CHECK(cudaMemcpy(b.data, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
}

}  // namespace

Buffer DeviceBuffer(int64_t rows, int64_t cols, DType dtype) {
  Buffer b;
  b.rows = rows;
  b.cols = cols;
  b.dtype = dtype;
  const size_t elem = dtype == DType::kF64 ? 8 : dtype == DType::kF16 ? 2 : 4;
  KCSIM_CHECK(cudaMalloc(&b.data, static_cast<size_t>(rows * cols) * elem));
  return b;
}

Model LoadModel(const ModelConfig& c) {
  Model m;
  m.config = c;
  std::mt19937_64 rng(c.seed);
  const float w = 1.f / std::sqrt(static_cast<float>(c.dim));
  m.embedding = DeviceBuffer(c.vocab, c.dim);
  Upload(m.embedding, rng, 1.f);
  for (int l = 0; l < c.layers; ++l) {
    LayerWeights lw;
    lw.attn_norm = DeviceBuffer(1, c.dim);
    lw.ffn_norm = DeviceBuffer(1, c.dim);
    lw.wq = DeviceBuffer(c.dim, c.dim);
    lw.wk = DeviceBuffer(c.dim, c.dim);
    lw.wv = DeviceBuffer(c.dim, c.dim);
    lw.wo = DeviceBuffer(c.dim, c.dim);
    lw.w_up = DeviceBuffer(c.dim, c.dim * c.ffn_mult);
    lw.w_down = DeviceBuffer(c.dim * c.ffn_mult, c.dim);
    Upload(lw.attn_norm, rng, 0.05f, 1.f);
    Upload(lw.ffn_norm, rng, 0.05f, 1.f);
    for (Buffer* b : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_up}) Upload(*b, rng, w);
    Upload(lw.w_down, rng, w / 2);
    m.layers.push_back(lw);
  }
  return m;
}

Activations AllocateActivations(const ModelConfig& c) {
  Activations a;
  const int64_t t = c.tokens;
  a.x = DeviceBuffer(t, c.dim);
  a.h = DeviceBuffer(t, c.dim);
  a.q = DeviceBuffer(t, c.dim);
  a.k = DeviceBuffer(t, c.dim);
  a.v = DeviceBuffer(t, c.dim);
  a.attn = DeviceBuffer(t, c.dim);
  a.scores = DeviceBuffer(static_cast<int64_t>(c.heads) * t, t);
  a.probs = DeviceBuffer(static_cast<int64_t>(c.heads) * t, t);
  a.up = DeviceBuffer(t, c.dim * c.ffn_mult);
  a.down = DeviceBuffer(t, c.dim);
  return a;
}

}  // namespace kcsim
