#pragma once
// Encoder-decoder transformer (Vaswani et al. 2017), post-norm or pre-norm,
// with the attention type chosen separately for encoder self-attention,
// decoder self-attention and cross-attention.
#include <vector>

#include "nn/attention/attention.h"
#include "nn/feed_forward.h"
#include "nn/positional.h"

namespace cmha::nn {

struct TransformerConfig {
  int64_t src_vocab = 0, tgt_vocab = 0;  // equal when share_all_embeddings
  int64_t d_model = 512, ffn_dim = 2048;
  int64_t encoder_layers = 6, decoder_layers = 6;
  AttentionConfig encoder_attention, decoder_attention, cross_attention;
  // Layers whose attention differs from their place's (attention_for_layer).
  LayerAttention encoder_attention_layers, decoder_attention_layers, cross_attention_layers;
  bool pre_norm = false;
  bool encoder_final_norm = false, decoder_final_norm = false;
  float dropout = 0.1f, activation_dropout = 0.0f;
  std::string activation = "relu";
  bool share_all_embeddings = true;  // one matrix for source, target and output
  bool share_decoder_output = true;  // output projection = target embedding
  bool scale_embedding = true;       // multiply embeddings by √d_model
  std::string positions = "sinusoidal";  // sinusoidal | learned
  int64_t max_positions = 1024;
  // Index of the first token's position: sinusoidal angles start here and a
  // learned table holds this many rows before it (fairseq: padding_idx + 1 = 2).
  int64_t position_offset = 0;
  float layer_norm_eps = 1e-5f;
};

class EncoderLayer : public Module {
 public:
  EncoderLayer(const TransformerConfig& cfg, int64_t layer, Generator& gen);  // layer: its index from 0
  Tensor forward(const Tensor& x, const AttentionMask& mask) const;  // [B, S, D] -> [B, S, D]
  std::shared_ptr<Attention> self_attn;
  std::shared_ptr<LayerNorm> self_attn_norm, ffn_norm;
  std::shared_ptr<FeedForward> ffn;
  std::shared_ptr<Dropout> drop;
  bool pre_norm;
};

// Per-layer caches for incremental decoding.
struct DecoderCache {
  std::vector<AttentionCache> self_attn, cross_attn;
  int64_t steps = 0;  // target positions already decoded
};

class DecoderLayer : public Module {
 public:
  DecoderLayer(const TransformerConfig& cfg, int64_t layer, Generator& gen);
  // x [B, T, D], memory [B, S, D] -> [B, T, D]
  Tensor forward(const Tensor& x, const Tensor& memory, const AttentionMask& memory_mask,
                 AttentionCache* self_cache, AttentionCache* cross_cache) const;
  std::shared_ptr<Attention> self_attn, cross_attn;
  std::shared_ptr<LayerNorm> self_attn_norm, cross_attn_norm, ffn_norm;
  std::shared_ptr<FeedForward> ffn;
  std::shared_ptr<Dropout> drop;
  bool pre_norm;
};

class Transformer : public Module {
 public:
  Transformer(const TransformerConfig& cfg, Generator& init_gen);
  // src [B, S] ids, src_pad b8 [B, S] (true = padding) -> memory [B, S, D]
  Tensor encode(const Tensor& src, const Tensor& src_pad) const;
  // tgt [B, T] ids (only the new positions when a cache is given) -> logits [B, T, V]
  Tensor decode(const Tensor& tgt, const Tensor& memory, const Tensor& src_pad, DecoderCache* cache = nullptr) const;
  Tensor forward(const Tensor& src, const Tensor& src_pad, const Tensor& tgt) const;  // -> [B, T, V]
  // decode and forward without the output projection: the decoder's final
  // states [B, T, D], for a loss fused with it (linear_cross_entropy with
  // output_weight).
  Tensor decode_states(const Tensor& tgt, const Tensor& memory, const Tensor& src_pad,
                       DecoderCache* cache = nullptr) const;
  Tensor forward_states(const Tensor& src, const Tensor& src_pad, const Tensor& tgt) const;
  DecoderCache new_cache() const;
  const TransformerConfig& config() const { return cfg_; }

  std::shared_ptr<Embedding> src_embed, tgt_embed;
  Tensor output_weight;  // [V, D]; the target embedding when shared
  std::shared_ptr<LearnedPositions> src_positions, tgt_positions;
  std::vector<std::shared_ptr<EncoderLayer>> encoder_layers;
  std::vector<std::shared_ptr<DecoderLayer>> decoder_layers;
  std::shared_ptr<LayerNorm> encoder_norm, decoder_norm;
  std::shared_ptr<Dropout> drop;

 private:
  Tensor embed(const Embedding& table, const LearnedPositions* learned, const Tensor& ids, int64_t first) const;
  TransformerConfig cfg_;
};

}  // namespace cmha::nn
