#include "nn/attention/grouped.h"

#include <cmath>

#include "autograd/ops.h"
#include "nn/attention/concat.h"
#include "nn/attention/registry.h"

namespace cmha::nn {

AttentionType grouped_attention_type() {
  return {.name = "grouped",
          .make = construct_attention<GroupedAttention>,
          .keys = {{.name = "kv_heads", .type = AttentionKeyType::integer, .default_value = "1",
                    .help = "Key/value heads of grouped attention (divides heads)", .min = 1, .max = 4096,
                    .field = &AttentionConfig::kv_heads}}};
}

GroupedAttention::GroupedAttention(const AttentionConfig& cfg, int64_t d_model, Generator& init_gen)
    : Attention(cfg, d_model) {
  const int64_t H = cfg_.heads, G = cfg_.kv_heads;
  CMHA_CHECK(G > 0 && H % G == 0, "attention.kv_heads (" + std::to_string(G) + ") must divide attention.heads (" +
                                      std::to_string(H) + ")");
  CMHA_CHECK(cfg_.key_dim % H == 0, "attention.key_dim (" + std::to_string(cfg_.key_dim) +
                                        ") must be divisible by attention.heads (" + std::to_string(H) + ")");
  const int64_t dk = cfg_.key_dim / H, dv = cfg_.value_dim / H;
  scale_ = cfg_.scale > 0 ? cfg_.scale : 1.0f / std::sqrt(static_cast<float>(dk));
  query_proj = register_module("query", std::make_shared<Linear>(d_model, cfg_.key_dim, cfg_.bias, init_gen));
  key_proj = register_module("key", std::make_shared<Linear>(d_model, G * dk, cfg_.bias, init_gen));
  value_proj = register_module("value", std::make_shared<Linear>(d_model, G * dv, cfg_.bias, init_gen));
  out_proj = register_module("out", std::make_shared<Linear>(cfg_.value_dim, d_model, cfg_.bias, init_gen));
}

Tensor GroupedAttention::forward(const Tensor& query, const Tensor& source, const AttentionMask& mask,
                                 AttentionCache* cache) {
  const int64_t H = cfg_.heads, G = cfg_.kv_heads, R = H / G;
  const int64_t B = query.size(0), Tq = query.size(1);
  const Projection wq{query_proj->weight, query_proj->bias}, wk{key_proj->weight, key_proj->bias},
      wv{value_proj->weight, value_proj->bias};
  // Self-attention: queries, keys and values in one GEMM; otherwise the keys
  // and values of the source in one (once per source with a static cache).
  std::vector<Tensor> qkv;
  if (query.same(source) && !(cache && cache->static_kv)) qkv = project_stacked(query, {wq, wk, wv});
  Tensor q = split_heads(qkv.empty() ? query_proj->forward(query) : qkv[0], H);  // [B, H, Tq, dk], not yet scaled
  Tensor k, v;  // [B, G, Tk, dk|dv]
  const int64_t offset = cached_keys_values(cache, k, v, [&](Tensor& kk, Tensor& vv) {
    const std::vector<Tensor> kv = qkv.empty() ? project_stacked(source, {wk, wv}) : std::vector<Tensor>{qkv[1], qkv[2]};
    kk = split_heads(kv[0], G);
    vv = split_heads(kv[1], G);
  }, 2, 2);
  // Fused: native grouped-query attention (query head h reads key/value head h / R).
  if (Tensor heads = fused_heads(q, k, v, scale_, mask, offset); heads.defined()) return merge_heads(heads);
  q = mul_scalar(q, scale_).reshape({B, G, R, Tq, q.size(3)});  // [B, G, R, Tq, dk]
  const int64_t Tk = k.size(2);
  // Each key head serves R query heads: broadcast over the R dim, no copies.
  Tensor scores = matmul(q, k.unsqueeze(2).transpose(-1, -2), DType::f32);   // [B, G, R, Tq, Tk]
  Tensor probs = attention_weights(scores.view({B, H, Tq, Tk}), mask, offset, *attn_drop_, v.dtype());
  Tensor heads = matmul(probs.view({B, G, R, Tq, Tk}), v.unsqueeze(2));        // [B, G, R, Tq, dv]
  return merge_heads(heads.view({B, H, Tq, heads.size(4)}));
}

}  // namespace cmha::nn
