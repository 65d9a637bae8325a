// model.h: a decoder-only transformer with synthetic weights.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kcsim/attention.h"
#include "kcsim/ops.h"

namespace kcsim {

struct ModelConfig {
  int layers = 24;
  int dim = 1024;
  int heads = 16;
  int vocab = 32000;
  int tokens = 512;
  int ffn_mult = 4;
  uint64_t seed = 42;
};

struct LayerWeights {
  Buffer attn_norm, wq, wk, wv, wo, ffn_norm, w_up, w_down;
};

struct Model {
  ModelConfig config;
  Buffer embedding;
  std::vector<LayerWeights> layers;
};

// Activations of one forward pass (reused layer to layer).
struct Activations {
  Buffer x, h, q, k, v, attn, scores, probs, up, down;
};

// Generates every weight on the host (deterministic, seeded) and uploads it:
// the stand-in for loading a checkpoint.
Model LoadModel(const ModelConfig& config);
Activations AllocateActivations(const ModelConfig& config);
// Builds a synthetic corpus, trains a byte-pair vocabulary on it and
// tokenizes a prompt of config.tokens tokens (host work before inference).
std::vector<int32_t> PreparePrompt(const ModelConfig& config);

// Called after the attention scores of `layer` were computed (for checks).
using ScoresHook = bool (*)(int layer, const Activations& act, const ModelConfig& config);
// Runs layers [0, last]; returns false when the hook asked to stop.
bool Forward(const Model& model, const int32_t* tokens, Activations& act, int last,
             ScoresHook hook, cudaStream_t s);

Buffer DeviceBuffer(int64_t rows, int64_t cols, DType dtype = DType::kF32);

}  // namespace kcsim
