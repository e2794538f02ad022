#include "nn/attention/concat.h"

#include <cmath>

#include "autograd/ops.h"
#include "nn/attention/registry.h"

namespace cmha::nn {

AttentionType concat_attention_type() { return {.name = "concat", .make = construct_attention<ConcatAttention>}; }

ConcatAttention::ConcatAttention(const AttentionConfig& cfg, int64_t d_model, Generator& init_gen)
    : Attention(cfg, d_model) {
  CMHA_CHECK(cfg_.key_dim % cfg_.heads == 0, "attention.key_dim (" + std::to_string(cfg_.key_dim) +
                                                 ") must be divisible by attention.heads (" +
                                                 std::to_string(cfg_.heads) + ") for type " + cfg_.type);
  scale_ = cfg_.scale > 0 ? cfg_.scale : 1.0f / std::sqrt(static_cast<float>(cfg_.key_dim / cfg_.heads));
  query_proj = register_module("query", std::make_shared<Linear>(d_model, cfg_.key_dim, cfg_.bias, init_gen));
  key_proj = register_module("key", std::make_shared<Linear>(d_model, cfg_.key_dim, cfg_.bias, init_gen));
  value_proj = register_module("value", std::make_shared<Linear>(d_model, cfg_.value_dim, cfg_.bias, init_gen));
  out_proj = register_module("out", std::make_shared<Linear>(cfg_.value_dim, d_model, cfg_.bias, init_gen));
}

int64_t cached_keys_values(AttentionCache* cache, Tensor& key, Tensor& value,
                           const std::function<void(Tensor&, Tensor&)>& project, int64_t key_time_dim,
                           int64_t value_time_dim) {
  if (!cache) {
    project(key, value);
    return 0;
  }
  if (cache->static_kv) {
    if (!cache->key.defined()) {
      project(cache->key, cache->value);
      cache->length = cache->key.size(key_time_dim);
    }
    key = cache->key;
    value = cache->value;
    return 0;
  }
  const int64_t before = cache->length;
  project(key, value);
  if (cache->key.defined()) {
    key = concat({cache->key, key}, key_time_dim);
    value = concat({cache->value, value}, value_time_dim);
  }
  cache->key = key;
  cache->value = value;
  cache->length = key.size(key_time_dim);
  return before;
}

Tensor ConcatAttention::forward(const Tensor& query, const Tensor& source, const AttentionMask& mask,
                                AttentionCache* cache) {
  const int64_t H = cfg_.heads;
  Tensor q = split_heads(query_proj->forward(query), H);  // [B, H, Tq, dk], not yet scaled
  Tensor k, v;                                            // [B, H, Tk, dk|dv]
  const int64_t offset = cached_keys_values(cache, k, v, [&](Tensor& kk, Tensor& vv) {
    kk = split_heads(key_proj->forward(source), H);
    vv = split_heads(value_proj->forward(source), H);
  }, 2, 2);
  const HeadMixing mixing = head_mixing();
  if (mixing.logits.defined() || mixing.weights.defined()) {
    note_unfused("talking-heads attention mixes the logits across heads, which no fused kernel does");
  } else if (Tensor heads = fused_heads(q, k, v, scale_, mask, offset); heads.defined()) {
    return merge_heads(heads);
  }
  q = mul_scalar(q, scale_);
  Tensor scores = matmul(q, k.transpose(-1, -2));                              // [B, H, Tq, Tk]
  Tensor probs = attention_weights(scores, mask, offset, *attn_drop_, mixing);
  return merge_heads(matmul(probs, v));                                        // [B, Tq, D]
}

}  // namespace cmha::nn
