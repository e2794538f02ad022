#pragma once
// The attention family behind one interface. A recipe picks the type with
// one key (attention.type); checkpoints record it (Attention::type()).
// nn/attention/registry.h lists the types, their recipe keys and the places
// attention sits in the models:
//   concat         Vaswani multi-head attention; key_dim free of d_model
//   collaborative  shared W̃_Q, W̃_K of width D̃k mixed per head (Cordonnier et al. 2020)
//   talking_heads  H×H mixing of logits and weights (Shazeer et al. 2020)
//   grouped        kv_heads key/value heads shared by groups of query heads
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "nn/layers.h"

namespace cmha::nn {

// The value of one attention key (registry.h), as the recipe types it.
using AttentionValue = std::variant<int64_t, double, bool, std::string>;

struct AttentionConfig {
  std::string type = "concat";
  int64_t heads = 8;
  int64_t key_dim = 0;    // total query/key width D_k (D̃k for collaborative); 0 = d_model
  int64_t value_dim = 0;  // total value width; 0 = d_model
  bool bias = true;       // biases of the projections (collaborative: value and output only)
  float dropout = 0.0f;   // on the attention weights
  float scale = 0.0f;     // score scale; 0 = the type's default (see each type)
  // collaborative: initialisation of the mixing matrix M [heads, D̃k]
  std::string mixing_init = "concatenate";  // concatenate | normal | uniform
  float mixing_std = 1.0f;                  // for normal; uniform draws from [0, 1)
  // talking_heads: initialisation of the two H×H mixing matrices
  std::string talking_init = "identity";  // identity | normal
  float talking_std = 0.0f;               // 0 = 1/√heads for normal
  // grouped: number of key/value heads (divides heads)
  int64_t kv_heads = 1;
  // The keys of a type registered without a member here (AttentionKey::field
  // unset), by name. extra_value<T> (T: int64_t, double, bool, std::string)
  // reads one, or its registered default when the config never set it.
  std::map<std::string, AttentionValue> extra;
  template <typename T>
  T extra_value(const std::string& key) const;
};

// The layers of one place set apart from the place's config (the recipe's
// model.<place>.layers), by layer index; each a whole config.
using LayerAttention = std::map<int64_t, AttentionConfig>;
// Layer `layer`'s config: its entry in `layers`, else the place's `all`.
const AttentionConfig& attention_for_layer(const AttentionConfig& all, const LayerAttention& layers, int64_t layer);

// What a query may not look at.
struct AttentionMask {
  Tensor key_padding;  // b8 [B, Tk], true at padding positions; may be undefined
  bool causal = false; // query t sees keys 0 .. t + (keys already in the cache)
};

// Incremental decoding state of one attention layer. Self-attention appends
// the new positions' keys and values each step; cross-attention computes
// them once from the encoder output (static_kv). The layout belongs to the
// attention type: concat and talking heads keep per-head keys [B, H, Tk, dk],
// grouped one key per group, and collaborative ONE key tensor [B, Tk, D̃k + H]
// shared by all heads (the shared keys, then each head's content-bias term).
struct AttentionCache {
  bool static_kv = false;
  Tensor key, value;
  int64_t length = 0;  // number of cached key positions
};

// Keys and values of `source` for this call, through the cache when given
// (appended for self-attention, computed once for cross-attention): what
// every attention type does with its cache. `project` fills the keys and
// values of the new positions. Returns the number of keys that precede this
// call's own positions. key_time_dim/value_time_dim: the sequence dim of each
// cached tensor.
int64_t cached_keys_values(AttentionCache* cache, Tensor& key, Tensor& value,
                           const std::function<void(Tensor&, Tensor&)>& project, int64_t key_time_dim,
                           int64_t value_time_dim);

class Attention : public Module {
 public:
  // query [B, Tq, D], source [B, Tk, D] -> [B, Tq, D]. For self-attention
  // pass the same tensor twice. With a cache, source holds only the new positions
  // (self-attention) or the encoder output (cross-attention).
  virtual Tensor forward(const Tensor& query, const Tensor& source, const AttentionMask& mask,
                         AttentionCache* cache = nullptr) = 0;
  virtual const char* type() const = 0;
  // What the layer costs (run/budget.h). The forward FLOPs of `queries`
  // query positions against `keys` key positions, the keys and values
  // projected from `keys` source positions: a multiply-add counts 2; biases,
  // softmax, masks and dropout are not counted.
  virtual double forward_flops(int64_t queries, int64_t keys) const = 0;
  // The numbers a decoding cache keeps per key position: the key side (all
  // heads together; collaborative: ONE shared key tensor) and the values.
  struct CacheWidth {
    int64_t key = 0, value = 0;
  };
  virtual CacheWidth cache_width() const = 0;
  // The parameters that make the scores: the query and key maps (and
  // collaborative's mixing matrix and content bias).
  virtual int64_t key_query_parameters() const = 0;
  const AttentionConfig& config() const { return cfg_; }
  float scale() const { return scale_; }
  // Head ablation (cmha eval|score|translate --mask-heads, cmha heads
  // --importance): the output of these heads is zero before the output
  // projection. Replaces the previous mask; {} = none. A head out of range
  // is a cmha::Error naming the head and the count.
  void mask_heads(const std::vector<int64_t>& heads);
  const std::vector<int64_t>& masked_heads() const { return masked_heads_; }
  // Collaborative layers: these shared query/key dimensions of D̃k are zero
  // for every head. Other types have none: a cmha::Error.
  virtual void mask_shared_dims(const std::vector<int64_t>& dims);
  virtual int64_t shared_dims() const { return 0; }  // D̃k where mask_shared_dims applies
  std::shared_ptr<Linear> value_proj, out_proj;  // shared by every type
  // The place the layer sits in ("encoder self-attention"), for the report
  // of attention paths (attention_paths_report); the models set it.
  void set_place(std::string place) { place_ = std::move(place); }
  const std::string& place() const { return place_; }

 protected:
  Attention(const AttentionConfig& cfg, int64_t d_model);
  // Shared tail: heads [B, H, Tq, dv] -> [B, Tq, H·dv] -> output projection.
  Tensor merge_heads(const Tensor& heads) const;
  // The FLOPs every type shares: the value and output projections and the
  // weights times the values (2 · queries · keys · value_dim).
  double value_flops(int64_t queries, int64_t keys) const;
  // The fused half of the attention core every type but talking heads
  // shares: softmax(scale · q·kᵀ + masks) · v per head, with the layer's
  // attention dropout, as one fused kernel (cuDNN's SDPA) when the device
  // has one for this problem. q [B, Hq, Tq, Dqk] (not yet scaled),
  // k [B, Hk, Tk, Dqk], v [B, Hv, Tk, Dv] -> heads [B, Hq, Tq, Dv] in q's
  // dtype, or an undefined tensor: then the type runs its own unfused path
  // (attention_weights and the matmuls), which the CPU and the emulated CUDA
  // device always take, so their numbers never change. Fused only on a real
  // GPU with bf16/f16 operands, or f32 ones under bf16 autocast (cast here,
  // keeping their layout); the key-padding mask must pad the end of each row
  // (as every cmha batch does). Records the path taken for this place.
  Tensor fused_heads(const Tensor& q, const Tensor& k, const Tensor& v, float scale, const AttentionMask& mask,
                     int64_t key_offset) const;
  // Records that this call took the unfused path for `reason` (talking heads).
  void note_unfused(const std::string& reason) const;
  AttentionConfig cfg_;
  float scale_ = 1.0f;
  std::vector<int64_t> masked_heads_;
  Tensor head_mask_;  // [1, H, 1, 1] ones with zeros at masked_heads_; undefined = none
  std::shared_ptr<Dropout> attn_drop_;
  std::string place_ = "attention";
};

// Which path each attention place took (fused or cmha's unfused), and why:
// recorded by the layers as they run (Attention::fused_heads), in the order
// the places first ran. Process-wide; reset_attention_paths forgets them.
struct AttentionPathRecord {
  std::string place, type;
  int64_t fused_calls = 0, unfused_calls = 0;
  std::string fused_reason, unfused_reason;  // the first of each
};
std::vector<AttentionPathRecord> attention_paths();
// Fused attention on or off for this process (on unless CMHA_FUSED_ATTENTION=0):
// off, every place takes cmha's unfused path (to compare the two on a GPU).
bool fused_attention_enabled();
void set_fused_attention_enabled(bool on);
void reset_attention_paths();
// "attention paths:" then one line per place:
//   "  encoder self-attention (concat): fused: <reason>"
// ("fused N calls, unfused M calls: ..." when a place took both); "" when none ran.
std::string attention_paths_report();

// Builds the attention named by cfg.type (registry.h); an unknown type or
// inconsistent sizes are a cmha::Error naming the key.
std::shared_ptr<Attention> make_attention(const AttentionConfig& cfg, int64_t d_model, Generator& init_gen);
// Layer `layer`'s attention at `place` ("encoder self-attention"): made from
// attention_for_layer, with its place set; an error in a layer's own settings
// names the place and the layer.
std::shared_ptr<Attention> make_layer_attention(const AttentionConfig& all, const LayerAttention& layers, int64_t layer,
                                                const std::string& place, int64_t d_model, Generator& init_gen);

// Splits [B, T, H·d] into heads [B, H, T, d] (a view; x may be a slice of
// its last dim, such as one piece of project_stacked).
Tensor split_heads(const Tensor& x, int64_t heads);

// x [..., D] through several linear maps (weight [n_i, D], bias [n_i] or
// undefined) in ONE GEMM against the stacked weights: the pieces
// [..., n_0], [..., n_1], ... are views of its one output. Self-attention
// projects its queries, keys and values this way: one GEMM of 3× the width
// (better blocked), one bf16 cast of x under autocast, and in backward one
// dx GEMM instead of three products summed.
struct Projection {
  Tensor weight, bias;
};
std::vector<Tensor> project_stacked(const Tensor& x, const std::vector<Projection>& projections);

// Attention weights from raw scores [B, H, Tq, Tk]: optional H×H mixing of
// the logits (talking heads), key-padding and causal masking, softmax,
// optional mixing of the weights, dropout. `key_offset` is the number of keys
// before the queries' own positions (causal masking with a decoding cache).
// The weights come out in `probs_dtype`, the values' dtype: bf16 probabilities
// of f32 scores under bf16 autocast (the softmax sums in f32 either way).
struct HeadMixing {
  Tensor logits;   // [H, H] or undefined
  Tensor weights;  // [H, H] or undefined
};
Tensor attention_weights(Tensor scores, const AttentionMask& mask, int64_t key_offset, const Dropout& drop,
                         DType probs_dtype, const HeadMixing& mixing = {});

}  // namespace cmha::nn
