#include "run/budget.h"

#include <cstdio>

#include "nn/transformer.h"
#include "nn/vit.h"
#include "run/model_config.h"
#include "tensor/error.h"

namespace cmha::run {

namespace {

constexpr int64_t kCacheBytes = 4;  // decoding caches f32

// 2 · positions · the weights of each Linear of a feed-forward block.
double ffn_flops(const nn::FeedForward& f, int64_t positions) {
  return 2.0 * static_cast<double>(positions) *
         static_cast<double>(f.fc1->weight.numel() + f.fc2->weight.numel());
}

void count_attention(ModelBudget& b, const nn::Attention& a) {
  b.attention_parameters += a.num_parameters();
  b.key_query_parameters += a.key_query_parameters();
}

}  // namespace

ModelBudget model_budget(const Recipe& r, const nn::Module& model) {
  ModelBudget b;
  b.kind = r.string("model.kind");
  b.parameters = model.num_parameters();
  double forward = 0;
  if (const auto* t = dynamic_cast<const nn::Transformer*>(&model)) {
    const int64_t S = r.integer("bench.src_len"), T = r.integer("bench.tgt_len");
    b.source_tokens = S;
    b.target_tokens = T;
    for (const auto& layer : t->encoder_layers) {
      count_attention(b, *layer->self_attn);
      forward += layer->self_attn->forward_flops(S, S) + ffn_flops(*layer->ffn, S);
    }
    for (const auto& layer : t->decoder_layers) {
      count_attention(b, *layer->self_attn);
      count_attention(b, *layer->cross_attn);
      forward += layer->self_attn->forward_flops(T, T) + layer->cross_attn->forward_flops(T, S) +
                 ffn_flops(*layer->ffn, T);
      const nn::Attention::CacheWidth self = layer->self_attn->cache_width(), cross = layer->cross_attn->cache_width();
      b.cache_key_bytes += self.key * kCacheBytes;
      b.cache_value_bytes += self.value * kCacheBytes;
      b.cross_cache_key_bytes += cross.key * kCacheBytes;
      b.cross_cache_value_bytes += cross.value * kCacheBytes;
    }
    forward += 2.0 * static_cast<double>(T) * static_cast<double>(t->output_weight.numel());  // logits
    b.train_flops = 3.0 * forward / static_cast<double>(T);
  } else if (const auto* v = dynamic_cast<const nn::VisionTransformer*>(&model)) {
    const nn::VitConfig& c = v->config();
    const int64_t N = c.num_patches() + 1 + (c.distillation_token ? 1 : 0);
    forward += 2.0 * static_cast<double>(c.num_patches()) * static_cast<double>(v->patch_embed->weight.numel());
    for (const auto& block : v->blocks) {
      count_attention(b, *block->attn);
      forward += block->attn->forward_flops(N, N) + ffn_flops(*block->mlp, N);
    }
    forward += 2.0 * static_cast<double>(v->head->weight.numel());
    if (v->head_dist) forward += 2.0 * static_cast<double>(v->head_dist->weight.numel());
    b.train_flops = 3.0 * forward;
  } else {
    throw Error("model_budget: the model is neither a transformer nor a vision transformer");
  }
  return b;
}

ModelBudget model_budget(const Recipe& r) {
  Generator gen(0);
  if (r.string("model.kind") == "vit") return model_budget(r, nn::VisionTransformer(run::vit_config(r), gen));
  return model_budget(r, nn::Transformer(run::transformer_config(r), gen));
}

nlohmann::ordered_json budget_json(const ModelBudget& b) {
  nlohmann::ordered_json j = {{"parameters", b.parameters},
                              {"attention_parameters", b.attention_parameters},
                              {"key_query_parameters", b.key_query_parameters}};
  if (b.kind == "vit") {
    j["train_flops_per_image"] = b.train_flops;
    return j;
  }
  j["train_flops_per_token"] = b.train_flops;
  j["kv_cache_bytes_per_token"] = b.cache_key_bytes + b.cache_value_bytes;
  j["kv_cache_key_bytes_per_token"] = b.cache_key_bytes;
  return j;
}

const std::vector<std::string>& budget_keys() {
  static const std::vector<std::string> keys{"parameters",           "attention_parameters",
                                             "key_query_parameters", "train_flops_per_token",
                                             "train_flops_per_image", "kv_cache_bytes_per_token",
                                             "kv_cache_key_bytes_per_token"};
  return keys;
}

std::string budget_text(const ModelBudget& b) {
  char line[512];
  std::string out;
  std::snprintf(line, sizeof line, "budget: %lld parameters, %lld in attention, %lld of them query/key\n",
                static_cast<long long>(b.parameters), static_cast<long long>(b.attention_parameters),
                static_cast<long long>(b.key_query_parameters));
  out += line;
  if (b.kind == "vit") {
    std::snprintf(line, sizeof line, "  training: %.4g FLOPs per image\n", b.train_flops);
    return out + line;
  }
  std::snprintf(line, sizeof line,
                "  training: %.4g FLOPs per target token (sentences of %lld source and %lld target tokens: "
                "bench.src_len, bench.tgt_len)\n",
                b.train_flops, static_cast<long long>(b.source_tokens), static_cast<long long>(b.target_tokens));
  out += line;
  std::snprintf(line, sizeof line,
                "  decoding cache: %lld bytes per target token (keys %lld, values %lld; f32, all decoder "
                "layers), cross-attention %lld per source token (keys %lld)\n",
                static_cast<long long>(b.cache_key_bytes + b.cache_value_bytes),
                static_cast<long long>(b.cache_key_bytes), static_cast<long long>(b.cache_value_bytes),
                static_cast<long long>(b.cross_cache_key_bytes + b.cross_cache_value_bytes),
                static_cast<long long>(b.cross_cache_key_bytes));
  return out + line;
}

}  // namespace cmha::run
