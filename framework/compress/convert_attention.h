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
  const nn::AttentionPlace* place = nullptr;  // its registry entry
  std::string key() const { return "model." + name; }
};
std::vector<AttentionPlace> attention_places(const run::Recipe& r);

// Picks places by the names a user types: "attention" (or "vit"), "encoder",
// "decoder", "cross" (or the full names); empty = every concat place. A
// name the model lacks, or a place that is not concat, is a cmha::Error.
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

struct CompressOptions {
  int64_t shared_dim = 0;            // D̃k
  std::vector<std::string> places;   // as select_places; empty = all concat places
  CpOptions als;                     // iterations, tolerance, init, seed
};
// The compressed checkpoint of `in` (read from `path`): converted weights, the
// recipe with those places collaborative (key_dim D̃k, the original score
// scale written explicitly), the trainer state with "compressed_from", and no
// optimiser or EMA state. A place's layers are decomposed side by side
// (cp_als_layers); `on_layer` then hears of each, in order.
run::Checkpoint compress_checkpoint(const run::Checkpoint& in, const std::string& path,
                                      const CompressOptions& opt,
                                      const std::function<void(const LayerReport&)>& on_layer = {});

}  // namespace cmha::compress
