#include "nn/attention/talking_heads.h"

#include <cmath>

#include "nn/init.h"

namespace cmha::nn {

TalkingHeadsAttention::TalkingHeadsAttention(const AttentionConfig& cfg, int64_t d_model, Generator& init_gen)
    : ConcatAttention(cfg, d_model, init_gen) {
  const int64_t H = cfg_.heads;
  logit_mixing = register_parameter("logit_mixing", Tensor::zeros({H, H}));
  weight_mixing = register_parameter("weight_mixing", Tensor::zeros({H, H}));
  if (cfg_.talking_init == "identity") {
    for (Tensor* m : {&logit_mixing, &weight_mixing})
      for (int64_t h = 0; h < H; ++h) m->data<float>()[h * H + h] = 1.0f;
  } else if (cfg_.talking_init == "normal") {
    const float std = cfg_.talking_std > 0 ? cfg_.talking_std : 1.0f / std::sqrt(static_cast<float>(H));
    init::normal_(logit_mixing, init_gen, 0.0f, std);
    init::normal_(weight_mixing, init_gen, 0.0f, std);
  } else {
    throw Error("attention.talking_init '" + cfg_.talking_init + "' is unknown; expected identity or normal");
  }
}

}  // namespace cmha::nn
