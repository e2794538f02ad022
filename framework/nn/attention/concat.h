#pragma once
#include <functional>

#include "nn/attention/attention.h"

namespace cmha::nn {

// Vaswani multi-head attention with the query/key width free of d_model:
// query/key [key_dim, D], value [value_dim, D], out [D, value_dim].
// Score scale 1/√(key_dim/heads) unless set.
class ConcatAttention : public Attention {
 public:
  ConcatAttention(const AttentionConfig& cfg, int64_t d_model, Generator& init_gen);
  Tensor forward(const Tensor& query, const Tensor& source, const AttentionMask& mask,
                 AttentionCache* cache = nullptr) override;
  const char* type() const override { return "concat"; }
  std::shared_ptr<Linear> query_proj, key_proj;

 protected:
  // Talking heads reuses everything but the mixing.
  virtual HeadMixing head_mixing() const { return {}; }
};

}  // namespace cmha::nn
