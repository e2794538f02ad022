#pragma once
#include "nn/attention/attention.h"

namespace cmha::nn {

// Grouped-query attention (multi-query when kv_heads = 1): kv_heads key and
// value heads, each shared by heads/kv_heads consecutive query heads.
// query [key_dim, D]; key [kv_heads·dk, D]; value [kv_heads·dv, D]; out [D, value_dim].
// Score scale 1/√dk, dk = key_dim/heads.
class GroupedAttention : public Attention {
 public:
  GroupedAttention(const AttentionConfig& cfg, int64_t d_model, Generator& init_gen);
  Tensor forward(const Tensor& query, const Tensor& source, const AttentionMask& mask,
                 AttentionCache* cache = nullptr) override;
  const char* type() const override { return "grouped"; }
  std::shared_ptr<Linear> query_proj, key_proj;
};

}  // namespace cmha::nn
