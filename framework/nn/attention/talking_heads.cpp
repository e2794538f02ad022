#include "nn/attention/talking_heads.h"

#include <cmath>

#include "nn/attention/registry.h"
#include "nn/init.h"

namespace cmha::nn {

AttentionType talking_heads_attention_type() {
  return {.name = "talking_heads",
          .make = construct_attention<TalkingHeadsAttention>,
          .keys = {{.name = "talking_init", .type = AttentionKeyType::string, .default_value = "identity",
                    .help = "Talking-heads mixing initialisation", .choices = {"identity", "normal"},
                    .init_only = true, .field = &AttentionConfig::talking_init},
                   {.name = "talking_std", .type = AttentionKeyType::real, .default_value = "0.0",
                    .help = "Std of the normal talking-heads initialisation; 0 = 1/sqrt(heads)", .min = 0,
                    .init_only = true, .field = &AttentionConfig::talking_std}}};
}

TalkingHeadsAttention::TalkingHeadsAttention(const AttentionConfig& cfg, int64_t d_model, Generator& init_gen)
    : ConcatAttention(cfg, d_model, init_gen) {
  const int64_t H = cfg_.heads;
  logit_mixing = register_parameter("logit_mixing", Tensor::zeros({H, H}));
  weight_mixing = register_parameter("weight_mixing", Tensor::zeros({H, H}));
  if (cfg_.talking_init == "identity") {
    init::block_identity_(logit_mixing);
    init::block_identity_(weight_mixing);
  } else if (cfg_.talking_init == "normal") {
    const float std = cfg_.talking_std > 0 ? cfg_.talking_std : 1.0f / std::sqrt(static_cast<float>(H));
    init::normal_(logit_mixing, init_gen, 0.0f, std);
    init::normal_(weight_mixing, init_gen, 0.0f, std);
  } else {
    throw Error("attention.talking_init '" + cfg_.talking_init + "' is unknown; expected identity or normal");
  }
}

}  // namespace cmha::nn
