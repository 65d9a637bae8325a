// forward.cu: one decoder layer after another (pre-norm attention + MLP).
#include <cmath>

#include "kcsim/attention.h"
#include "kcsim/check.h"
#include "kcsim/model.h"
#include "kcsim/ops.h"

namespace kcsim {

bool Forward(const Model& model, const int32_t* tokens, Activations& a, int last,
             ScoresHook hook, cudaStream_t s) {
  const ModelConfig& c = model.config;
  AttentionShape shape;
  shape.heads = c.heads;
  shape.tokens = c.tokens;
  shape.head_dim = c.dim / c.heads;
  const float scale = 1.f / std::sqrt(static_cast<float>(shape.head_dim));
  Embedding(tokens, c.tokens, model.embedding, a.x, s);
  for (int l = 0; l <= last && l < c.layers; ++l) {
    const LayerWeights& w = model.layers[static_cast<size_t>(l)];
    RmsNorm(a.x, w.attn_norm, a.h, s);
    MatMul(a.h, w.wq, a.q, s);
    MatMul(a.h, w.wk, a.k, s);
    MatMul(a.h, w.wv, a.v, s);
    Rope(a.q, 0, s);
    Rope(a.k, 0, s);
    AttentionScores(static_cast<const float*>(a.q.data), static_cast<const float*>(a.k.data),
                    static_cast<float*>(a.scores.data), shape, scale, s);
    if (hook != nullptr && !hook(l, a, c)) return false;
    Softmax(a.scores, a.probs, s);
    AttentionApply(static_cast<const float*>(a.probs.data), static_cast<const float*>(a.v.data),
                   static_cast<float*>(a.attn.data), shape, s);
    MatMul(a.attn, w.wo, a.h, s);
    Add(a.x, a.h, a.x, s);
    RmsNorm(a.x, w.ffn_norm, a.h, s);
    MatMul(a.h, w.w_up, a.up, s);
    Silu(a.up, a.up, s);
    MatMul(a.up, w.w_down, a.down, s);
    Add(a.x, a.down, a.x, s);
  }
  return true;
}

}  // namespace kcsim
