#include "nn/attention/collaborative.h"

#include <cmath>

#include "autograd/ops.h"
#include "nn/attention/concat.h"
#include "nn/attention/registry.h"
#include "nn/init.h"

namespace cmha::nn {

AttentionType collaborative_attention_type() {
  return {.name = "collaborative",
          .make = construct_attention<CollaborativeAttention>,
          .keys = {{.name = "mixing_init", .type = AttentionKeyType::string, .default_value = "concatenate",
                    .help = "Collaborative mixing-matrix initialisation",
                    .choices = {"concatenate", "normal", "uniform"}, .init_only = true, .field = &AttentionConfig::mixing_init},
                   {.name = "mixing_std", .type = AttentionKeyType::real, .default_value = "1.0",
                    .help = "Std of the normal mixing initialisation", .min = 0, .init_only = true,
                    .field = &AttentionConfig::mixing_std}},
          .key_dim_note = "D~k, shared by the heads"};
}

CollaborativeAttention::CollaborativeAttention(const AttentionConfig& cfg, int64_t d_model, Generator& init_gen)
    : Attention(cfg, d_model) {
  const int64_t H = cfg_.heads, Dk = cfg_.key_dim;
  scale_ = cfg_.scale > 0 ? cfg_.scale : 1.0f / std::sqrt(static_cast<float>(d_model) / static_cast<float>(H));
  query_proj = register_module("query", std::make_shared<Linear>(d_model, Dk, false, init_gen));
  key_proj = register_module("key", std::make_shared<Linear>(d_model, Dk, false, init_gen));
  mixing = register_parameter("mixing", Tensor::zeros({H, Dk}));
  content_bias = register_module("content_bias", std::make_shared<Linear>(d_model, H, false, init_gen));
  init::zeros_(content_bias->weight);  // as a zero query bias would be
  value_proj = register_module("value", std::make_shared<Linear>(d_model, cfg_.value_dim, cfg_.bias, init_gen));
  out_proj = register_module("out", std::make_shared<Linear>(cfg_.value_dim, d_model, cfg_.bias, init_gen));
  if (cfg_.mixing_init == "concatenate") {
    // Blocks of ones: head h uses dims [h·D̃k/H, (h+1)·D̃k/H) — exactly concat attention.
    CMHA_CHECK(Dk % H == 0, "attention.mixing_init 'concatenate' needs key_dim (" + std::to_string(Dk) +
                                ") divisible by heads (" + std::to_string(H) + "); use normal or uniform");
    init::block_identity_(mixing);
  } else if (cfg_.mixing_init == "normal") {
    init::normal_(mixing, init_gen, 0.0f, cfg_.mixing_std);
  } else if (cfg_.mixing_init == "uniform") {
    init::uniform_(mixing, init_gen, 0.0f, 1.0f);
  } else {
    throw Error("attention.mixing_init '" + cfg_.mixing_init + "' is unknown; expected concatenate, normal or uniform");
  }
}

void CollaborativeAttention::mask_shared_dims(const std::vector<int64_t>& dims) {
  dim_mask_ = Tensor();
  if (dims.empty()) return;
  Tensor mask = Tensor::ones({cfg_.key_dim});
  for (const int64_t d : dims) {
    CMHA_CHECK(d >= 0 && d < cfg_.key_dim, place() + ": there is no shared dimension " + std::to_string(d) +
                                               " (D~k is " + std::to_string(cfg_.key_dim) + ", 0 to " +
                                               std::to_string(cfg_.key_dim - 1) + ")");
    mask.data<float>()[d] = 0.0f;
  }
  dim_mask_ = mask;
}

Tensor CollaborativeAttention::forward(const Tensor& query, const Tensor& source, const AttentionMask& mask,
                                       AttentionCache* cache) {
  const int64_t H = cfg_.heads;
  // The keys and the content bias come from one map ([D̃k + H, D] stacked
  // weights): keys [B, Tk, D̃k + H] hold the shared keys then each head's bias.
  const Projection wq{query_proj->weight, {}}, wkb{concat({key_proj->weight, content_bias->weight}, 0), {}},
      wv{value_proj->weight, value_proj->bias};
  // Self-attention: queries, keys and values in one GEMM; otherwise the keys
  // and values of the source in one (once per source with a static cache).
  std::vector<Tensor> qkv;
  if (query.same(source) && !(cache && cache->static_kv)) qkv = project_stacked(query, {wq, wkb, wv});
  Tensor q = qkv.empty() ? query_proj->forward(query) : qkv[0];  // [B, Tq, D̃k]
  if (dim_mask_.defined()) q = mul(q, dim_mask_.to(q.device()).to(q.dtype()));  // masked shared dimensions: 0
  Tensor qh = collaborative_queries(q, mixing, scale_);         // [B, H, Tq, D̃k + H]
  Tensor keys, v;
  const int64_t offset = cached_keys_values(cache, keys, v, [&](Tensor& kk, Tensor& vv) {
    const std::vector<Tensor> kv = qkv.empty() ? project_stacked(source, {wkb, wv}) : std::vector<Tensor>{qkv[1], qkv[2]};
    kk = kv[0];
    vv = split_heads(kv[1], H);  // [B, H, Tk, dv]
  }, 1, 2);
  // Fused: multi-query attention with ONE key head [B, 1, Tk, D̃k + H] and
  // the scale already in the queries (fused_heads pads the width to a
  // multiple of 8); cuDNN sums dK over the heads, and dQ_h goes back through
  // collaborative_queries' backward.
  if (Tensor heads = fused_heads(qh, keys.unsqueeze(1), v, 1.0f, mask, offset); heads.defined())
    return merge_heads(heads);
  // Every head against the one shared key tensor: qh's e_h columns pick head
  // h's content bias, so this single GEMM ([B, H·Tq, D̃k + H] @ [B, D̃k + H, Tk],
  // matmul folds the heads into the rows) is the whole score, bias included.
  Tensor scores = matmul(qh, keys.unsqueeze(1).transpose(-1, -2), DType::f32);  // [B, H, Tq, Tk]
  Tensor probs = attention_weights(scores, mask, offset, *attn_drop_, v.dtype());
  return merge_heads(matmul(probs, v));
}

}  // namespace cmha::nn
