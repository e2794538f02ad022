#include "nn/transformer.h"

#include <cmath>

#include "autograd/ops.h"
#include "nn/init.h"

namespace cmha::nn {

EncoderLayer::EncoderLayer(const TransformerConfig& cfg, int64_t layer, Generator& gen) : pre_norm(cfg.pre_norm) {
  // The places are the roles of nn/attention/registry.cpp's places.
  self_attn = register_module("self_attn", make_layer_attention(cfg.encoder_attention, cfg.encoder_attention_layers,
                                                                layer, "encoder self-attention", cfg.d_model, gen));
  self_attn_norm = register_module("self_attn_norm", std::make_shared<LayerNorm>(cfg.d_model, cfg.layer_norm_eps));
  ffn = register_module("ffn", std::make_shared<FeedForward>(cfg.d_model, cfg.ffn_dim, cfg.activation,
                                                             cfg.activation_dropout, gen));
  ffn_norm = register_module("ffn_norm", std::make_shared<LayerNorm>(cfg.d_model, cfg.layer_norm_eps));
  drop = register_module("drop", std::make_shared<Dropout>(cfg.dropout));
}

Tensor EncoderLayer::forward(const Tensor& x, const AttentionMask& mask) const {
  Tensor h = pre_norm ? self_attn_norm->forward(x) : x;
  Tensor y = add(x, drop->forward(self_attn->forward(h, h, mask)));
  if (!pre_norm) y = self_attn_norm->forward(y);
  h = pre_norm ? ffn_norm->forward(y) : y;
  Tensor z = add(y, drop->forward(ffn->forward(h)));
  return pre_norm ? z : ffn_norm->forward(z);
}

DecoderLayer::DecoderLayer(const TransformerConfig& cfg, int64_t layer, Generator& gen) : pre_norm(cfg.pre_norm) {
  self_attn = register_module("self_attn", make_layer_attention(cfg.decoder_attention, cfg.decoder_attention_layers,
                                                                layer, "decoder self-attention", cfg.d_model, gen));
  self_attn_norm = register_module("self_attn_norm", std::make_shared<LayerNorm>(cfg.d_model, cfg.layer_norm_eps));
  cross_attn = register_module("cross_attn", make_layer_attention(cfg.cross_attention, cfg.cross_attention_layers,
                                                                  layer, "decoder cross-attention", cfg.d_model, gen));
  cross_attn_norm = register_module("cross_attn_norm", std::make_shared<LayerNorm>(cfg.d_model, cfg.layer_norm_eps));
  ffn = register_module("ffn", std::make_shared<FeedForward>(cfg.d_model, cfg.ffn_dim, cfg.activation,
                                                             cfg.activation_dropout, gen));
  ffn_norm = register_module("ffn_norm", std::make_shared<LayerNorm>(cfg.d_model, cfg.layer_norm_eps));
  drop = register_module("drop", std::make_shared<Dropout>(cfg.dropout));
}

Tensor DecoderLayer::forward(const Tensor& x, const Tensor& memory, const AttentionMask& memory_mask,
                             AttentionCache* self_cache, AttentionCache* cross_cache) const {
  // One residual block: pre-norm normalises the branch input, post-norm the sum.
  auto block = [&](const Tensor& in, const LayerNorm& norm, auto&& branch) {
    Tensor h = pre_norm ? norm.forward(in) : in;
    Tensor y = add(in, drop->forward(branch(h)));
    return pre_norm ? y : norm.forward(y);
  };
  AttentionMask causal;
  causal.causal = true;
  Tensor y = block(x, *self_attn_norm, [&](const Tensor& h) { return self_attn->forward(h, h, causal, self_cache); });
  y = block(y, *cross_attn_norm,
            [&](const Tensor& h) { return cross_attn->forward(h, memory, memory_mask, cross_cache); });
  return block(y, *ffn_norm, [&](const Tensor& h) { return ffn->forward(h); });
}

Transformer::Transformer(const TransformerConfig& cfg, Generator& gen) : cfg_(cfg) {
  CMHA_CHECK(cfg.src_vocab > 0 && cfg.tgt_vocab > 0, "model: the vocabulary sizes must be positive");
  CMHA_CHECK(!cfg.share_all_embeddings || cfg.src_vocab == cfg.tgt_vocab,
             "model.share_all_embeddings needs one vocabulary, got source " + std::to_string(cfg.src_vocab) +
                 " and target " + std::to_string(cfg.tgt_vocab));
  CMHA_CHECK(cfg.positions == "sinusoidal" || cfg.positions == "learned",
             "model.positions must be 'sinusoidal' or 'learned', got '" + cfg.positions + "'");
  src_embed = register_module("src_embed", std::make_shared<Embedding>(cfg.src_vocab, cfg.d_model, gen));
  if (cfg.share_all_embeddings) {
    tgt_embed = src_embed;
  } else {
    tgt_embed = register_module("tgt_embed", std::make_shared<Embedding>(cfg.tgt_vocab, cfg.d_model, gen));
  }
  if (cfg.share_decoder_output) {
    output_weight = tgt_embed->weight;
  } else {
    output_weight = register_parameter("output.weight", Tensor::empty({cfg.tgt_vocab, cfg.d_model}));
    init::normal_(output_weight, gen, 0.0f, 1.0f / std::sqrt(static_cast<float>(cfg.d_model)));
  }
  if (cfg.positions == "learned") {
    src_positions = register_module("src_positions", std::make_shared<LearnedPositions>(cfg.max_positions + cfg.position_offset, cfg.d_model, gen));
    tgt_positions = register_module("tgt_positions", std::make_shared<LearnedPositions>(cfg.max_positions + cfg.position_offset, cfg.d_model, gen));
  }
  for (int64_t i = 0; i < cfg.encoder_layers; ++i)
    encoder_layers.push_back(register_module("encoder.layers." + std::to_string(i), std::make_shared<EncoderLayer>(cfg, i, gen)));
  for (int64_t i = 0; i < cfg.decoder_layers; ++i)
    decoder_layers.push_back(register_module("decoder.layers." + std::to_string(i), std::make_shared<DecoderLayer>(cfg, i, gen)));
  if (cfg.encoder_final_norm)
    encoder_norm = register_module("encoder.norm", std::make_shared<LayerNorm>(cfg.d_model, cfg.layer_norm_eps));
  if (cfg.decoder_final_norm)
    decoder_norm = register_module("decoder.norm", std::make_shared<LayerNorm>(cfg.d_model, cfg.layer_norm_eps));
  drop = register_module("drop", std::make_shared<Dropout>(cfg.dropout));
}

Tensor Transformer::embed(const Embedding& table, const LearnedPositions* learned, const Tensor& ids,
                          int64_t first) const {
  const int64_t T = ids.size(1);
  CMHA_CHECK(first + T <= cfg_.max_positions || !learned,
             "sequence of " + std::to_string(first + T) + " positions exceeds model.max_positions " +
                 std::to_string(cfg_.max_positions));
  Tensor x = table.forward(ids);  // [B, T, D]
  if (cfg_.scale_embedding) x = mul_scalar(x, std::sqrt(static_cast<float>(cfg_.d_model)));
  const int64_t at = first + cfg_.position_offset;
  Tensor pos = learned ? learned->forward(T, at) : sinusoidal_positions(T, cfg_.d_model, at, x.device());  // [T, D]
  return drop->forward(add(x, pos));
}

Tensor Transformer::encode(const Tensor& src, const Tensor& src_pad) const {
  Tensor x = embed(*src_embed, src_positions.get(), src, 0);
  AttentionMask mask;
  mask.key_padding = src_pad;
  for (auto& layer : encoder_layers) x = layer->forward(x, mask);
  return encoder_norm ? encoder_norm->forward(x) : x;
}

Tensor Transformer::decode(const Tensor& tgt, const Tensor& memory, const Tensor& src_pad, DecoderCache* cache) const {
  return linear(decode_states(tgt, memory, src_pad, cache), output_weight);  // [B, T, V]
}

Tensor Transformer::decode_states(const Tensor& tgt, const Tensor& memory, const Tensor& src_pad,
                                  DecoderCache* cache) const {
  const int64_t first = cache ? cache->steps : 0;
  Tensor x = embed(*tgt_embed, tgt_positions.get(), tgt, first);
  AttentionMask memory_mask;
  memory_mask.key_padding = src_pad;
  for (size_t i = 0; i < decoder_layers.size(); ++i)
    x = decoder_layers[i]->forward(x, memory, memory_mask, cache ? &cache->self_attn[i] : nullptr,
                                   cache ? &cache->cross_attn[i] : nullptr);
  if (decoder_norm) x = decoder_norm->forward(x);
  if (cache) cache->steps += tgt.size(1);
  return x;  // [B, T, D]
}

Tensor Transformer::forward(const Tensor& src, const Tensor& src_pad, const Tensor& tgt) const {
  return decode(tgt, encode(src, src_pad), src_pad);
}

Tensor Transformer::forward_states(const Tensor& src, const Tensor& src_pad, const Tensor& tgt) const {
  return decode_states(tgt, encode(src, src_pad), src_pad);
}

DecoderCache Transformer::new_cache() const {
  DecoderCache c;
  c.self_attn.resize(decoder_layers.size());
  c.cross_attn.resize(decoder_layers.size());
  for (auto& a : c.cross_attn) a.static_kv = true;
  return c;
}

}  // namespace cmha::nn
