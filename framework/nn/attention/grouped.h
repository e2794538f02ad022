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
  // Every query head scores against its group's key: 2 · queries · keys · key_dim.
  double forward_flops(int64_t queries, int64_t keys) const override {
    const double q = static_cast<double>(queries), k = static_cast<double>(keys);
    return 2.0 * q * static_cast<double>(query_proj->weight.numel()) +
           2.0 * k * static_cast<double>(key_proj->weight.numel()) + 2.0 * q * k * static_cast<double>(cfg_.key_dim) +
           value_flops(queries, keys);
  }
  CacheWidth cache_width() const override { return {key_proj->weight.size(0), value_proj->weight.size(0)}; }
  int64_t key_query_parameters() const override { return query_proj->num_parameters() + key_proj->num_parameters(); }
  std::shared_ptr<Linear> query_proj, key_proj;
};

}  // namespace cmha::nn
