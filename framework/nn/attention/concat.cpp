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

Tensor ConcatAttention::forward(const Tensor& query, const Tensor& source, const AttentionMask& mask,
                                AttentionCache* cache) {
  const int64_t H = cfg_.heads;
  const Projection wq{query_proj->weight, query_proj->bias}, wk{key_proj->weight, key_proj->bias},
      wv{value_proj->weight, value_proj->bias};
  // Self-attention: queries, keys and values in one GEMM; otherwise the keys
  // and values of the source in one (once per source with a static cache).
  std::vector<Tensor> qkv;
  if (query.same(source) && !(cache && cache->static_kv)) qkv = project_stacked(query, {wq, wk, wv});
  Tensor q = split_heads(qkv.empty() ? query_proj->forward(query) : qkv[0], H);  // [B, H, Tq, dk], not yet scaled
  Tensor k, v;  // [B, H, Tk, dk|dv]
  const int64_t offset = cached_keys_values(cache, k, v, [&](Tensor& kk, Tensor& vv) {
    const std::vector<Tensor> kv = qkv.empty() ? project_stacked(source, {wk, wv}) : std::vector<Tensor>{qkv[1], qkv[2]};
    kk = split_heads(kv[0], H);
    vv = split_heads(kv[1], H);
  }, 2, 2);
  const HeadMixing mixing = head_mixing();
  if (mixing.logits.defined() || mixing.weights.defined()) {
    note_unfused("talking-heads attention mixes the logits across heads, which no fused kernel does");
  } else if (Tensor heads = fused_heads(q, k, v, scale_, mask, offset); heads.defined()) {
    return merge_heads(heads);
  }
  q = mul_scalar(q, scale_);
  Tensor scores = matmul(q, k.transpose(-1, -2), DType::f32);                  // [B, H, Tq, Tk]
  Tensor probs = attention_weights(scores, mask, offset, *attn_drop_, v.dtype(), mixing);
  return merge_heads(matmul(probs, v));                                        // [B, Tq, D]
}

}  // namespace cmha::nn
