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
  Tensor logit_mixing, weight_mixing;

 protected:
  HeadMixing head_mixing() const override { return {logit_mixing, weight_mixing}; }
};

}  // namespace cmha::nn
