#pragma once
// Post-hoc compression (Cordonnier, Loukas & Jaggi 2020, section 3.3): every
// concat attention layer of a checkpoint becomes a collaborative one of
// shared width D̃k, without retraining.
//   W_Q^(i) W_K^(i)ᵀ ≈ W̃_Q diag(m_i) W̃_Kᵀ            CP decomposition (cp_als.h)
//   content bias c_i = W_K^(i) b_Q^(i)               the query bias, moved to the keys
//   key bias dropped                                  it adds a per-query constant: the softmax ignores it
//   values, output projection, score scale           unchanged
// When D̃k ≥ D_k the exact concatenate factorisation is written, so the model
// computes the same function.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "compress/cp_als.h"
#include "nn/attention/registry.h"
#include "run/checkpoint.h"
#include "run/recipe.h"

namespace cmha::compress {

// A place of the recipe where attention sits (nn/attention/registry.h:
// "attention" in a ViT; "encoder_attention", "decoder_attention",
// "cross_attention" in a transformer) and the weight-name prefixes of its
// layers ("blocks.3.attn.").
struct AttentionPlace {
  std::string name;
  std::vector<std::string> prefixes;
  std::vector<nn::AttentionConfig> configs;   // each layer's (model.<name>.layers on top of the place's)
  const nn::AttentionPlace* place = nullptr;  // its registry entry
  std::string key() const { return "model." + name; }
};
std::vector<AttentionPlace> attention_places(const run::Recipe& r);

// Picks places by the names a user types: "attention" (or "vit"), "encoder",
// "decoder", "cross" (or the full names); empty = every place with a concat
// layer. A name the model lacks, or a place without a concat layer, is a cmha::Error.
std::vector<AttentionPlace> select_places(const run::Recipe& r, const std::vector<std::string>& names);

// What one converted layer reports.
struct LayerReport {
  std::string prefix;            // "blocks.0.attn."
  int64_t key_dim = 0;           // D_k of the concat layer
  int64_t shared_dim = 0;        // D̃k written
  bool exact = false;            // concatenate factorisation (no iterations)
  int64_t iterations = 0;
  double error = 0.0;            // relative reconstruction error of the products
  double seconds = 0.0;          // its conversion, on its thread (layers may run side by side)
};

// Converts the concat layer under `prefix` in `weights` (in place) to a
// collaborative layer of width min(shared_dim, D_k). `als.rank` is ignored.
LayerReport convert_layer(std::map<std::string, Tensor>& weights, const std::string& prefix, int64_t heads,
                          int64_t shared_dim, const CpOptions& als);

// One layer's own D̃k: `place` as select_places takes it ("encoder"), `layer` from 0.
struct LayerKeyDim {
  std::string place;
  int64_t layer = 0;
  int64_t shared_dim = 0;
};
struct CompressOptions {
  int64_t shared_dim = 0;            // D̃k of every concat layer of the places; 0 = only those in `layers`
  std::vector<LayerKeyDim> layers;   // layers with their own D̃k (each must be concat)
  std::vector<std::string> places;   // as select_places; empty = all places with a concat layer
  CpOptions als;                     // iterations, tolerance, init, seed
};
// `cmha compress --key-dim`'s list: "64" (every layer), "encoder.0=128,encoder.5=32"
// (those layers), or both ("encoder.0=128,64"); a bad item is a cmha::Error naming it.
void parse_key_dims(const std::string& text, CompressOptions& opt);
// The compressed checkpoint of `in` (read from `path`): converted weights, the
// recipe with those layers collaborative (key_dim D̃k, the original score
// scale written explicitly: for the whole place when all its layers got one
// D̃k, else in model.<place>.layers), the trainer state with "compressed_from", and no
// optimiser or EMA state. A place's layers are decomposed side by side
// (cp_als_layers); `on_layer` then hears of each, in order.
run::Checkpoint compress_checkpoint(const run::Checkpoint& in, const std::string& path,
                                      const CompressOptions& opt,
                                      const std::function<void(const LayerReport&)>& on_layer = {});

}  // namespace cmha::compress
