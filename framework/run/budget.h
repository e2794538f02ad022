#pragma once
// What a model costs, printed beside every result (results.json, cmha info,
// sweep.csv): its parameters (all, in attention, in the query/key maps), the
// FLOPs of one training step per target token (translation) or per image
// (ViT), and what decoding caches per target token. Counted from the built
// model's layers (nn::Attention::forward_flops, cache_width), so a layer's
// own settings (model.<place>.layers) count as they are.
//
// FLOPs: a multiply-add counts 2; the GEMMs of projections, feed-forward
// blocks, attention scores and weighted values, the patch embedding and the
// output layer; embeddings' lookups, biases, norms, softmax and the loss are
// left out. Training = 3 × the forward (the backward's two GEMMs per forward
// one). A transformer's sentences are assumed bench.src_len source and
// bench.tgt_len target tokens long (self-attention counted over all
// positions, as the kernels compute it); a ViT's images have its patches
// plus the class (and distillation) token.
#include <nlohmann/json.hpp>
#include <string>

#include "nn/module.h"
#include "run/recipe.h"

namespace cmha::run {

struct ModelBudget {
  std::string kind;                   // transformer | vit
  int64_t parameters = 0;             // every weight, shared ones once
  int64_t attention_parameters = 0;   // the attention layers'
  int64_t key_query_parameters = 0;   // those making the scores (nn::Attention::key_query_parameters)
  double train_flops = 0;             // one training step, per target token (transformer) or per image (vit)
  int64_t source_tokens = 0, target_tokens = 0;  // the lengths assumed (vit: tokens per image, 0)
  // Decoding (transformer): f32 bytes the decoder's self-attention layers
  // cache per generated token, keys and values apart; and the
  // cross-attention's, per source token (computed once per sentence).
  int64_t cache_key_bytes = 0, cache_value_bytes = 0;
  int64_t cross_cache_key_bytes = 0, cross_cache_value_bytes = 0;
};

// The budget of `model`, a Transformer or a VisionTransformer built from `r`.
ModelBudget model_budget(const Recipe& r, const nn::Module& model);
// Builds the model `r` describes (random weights, on the CPU) and counts it.
ModelBudget model_budget(const Recipe& r);

// The budget as flat JSON for results.json and sweep.csv: parameters,
// attention_parameters, key_query_parameters, train_flops_per_token (or
// _per_image), and for a transformer kv_cache_bytes_per_token with its
// key part kv_cache_key_bytes_per_token.
nlohmann::ordered_json budget_json(const ModelBudget& b);
// The keys of budget_json a sweep may plot against (cmha sweep --x).
const std::vector<std::string>& budget_keys();
// Lines for `cmha info`: "budget: ...".
std::string budget_text(const ModelBudget& b);

}  // namespace cmha::run
