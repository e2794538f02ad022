#pragma once
#include "nn/attention/concat.h"

namespace cmha::nn {

// Talking-heads attention (Shazeer et al. 2020): concat attention whose
// logits are mixed across heads by logit_mixing [H, H] before the softmax
// and whose weights are mixed by weight_mixing [H, H] after it.
class TalkingHeadsAttention : public ConcatAttention {
 public:
  TalkingHeadsAttention(const AttentionConfig& cfg, int64_t d_model, Generator& init_gen);
  const char* type() const override { return "talking_heads"; }
  // Concat's, plus the two H×H mixings of the [H, queries, keys] logits and weights.
  double forward_flops(int64_t queries, int64_t keys) const override {
    const double H = static_cast<double>(cfg_.heads);
    return ConcatAttention::forward_flops(queries, keys) +
           2.0 * 2.0 * static_cast<double>(queries) * static_cast<double>(keys) * H * H;
  }
  Tensor logit_mixing, weight_mixing;

 protected:
  HeadMixing head_mixing() const override { return {logit_mixing, weight_mixing}; }
};

}  // namespace cmha::nn
