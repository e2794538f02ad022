#pragma once
#include "nn/attention/attention.h"

namespace cmha::nn {

// Collaborative multi-head attention (Cordonnier, Loukas, Jaggi 2020).
// All heads share W̃_Q, W̃_K ∈ R^{D×D̃k} (query.weight, key.weight: [D̃k, D],
// no bias); head h scores with the mixing row m_h (mixing: [H, D̃k]):
//   score_h(x, y) = scale · (x W̃_Q diag(m_h) W̃_Kᵀ yᵀ + c_h · y)
// where c_h (content_bias.weight: [H, D]) replaces the query bias (the key
// bias cancels in the softmax). Values and output as in concat attention.
// Q/K parameters: (2·D + H)·D̃k. Keys are computed once for all heads; the
// decoding cache holds ONE key tensor [B, Tk, D̃k + H] (keys and content bias).
// Default scale 1/√(d_model/heads), the scale a converted concat layer had.
class CollaborativeAttention : public Attention {
 public:
  CollaborativeAttention(const AttentionConfig& cfg, int64_t d_model, Generator& init_gen);
  Tensor forward(const Tensor& query, const Tensor& source, const AttentionMask& mask,
                 AttentionCache* cache = nullptr) override;
  const char* type() const override { return "collaborative"; }
  int64_t shared_dim() const { return cfg_.key_dim; }
  std::shared_ptr<Linear> query_proj, key_proj, content_bias;
  Tensor mixing;
};

}  // namespace cmha::nn
