#pragma once
// The paper's Figure 1 for any checkpoint (Cordonnier, Loukas & Jaggi 2020):
// per attention layer, the share of energy (sum of squared singular values)
// captured by the leading principal components of the concatenated query
// projection W_Q, of W_K, and of the per-head products W_Q^(i) W_K^(i)ᵀ
// stacked across heads ([T_1 … T_H], D × H·D). Heads that learn redundant
// key/query projections show as products needing far fewer dimensions than
// the heads' concatenated width.
#include <string>
#include <vector>

#include "run/checkpoint.h"

namespace cmha::compress {

struct EnergyCurve {
  std::vector<double> cumulative;  // cumulative[k] = energy share of the k + 1 leading components
  // The fewest components holding `fraction` of the energy.
  int64_t dims_for(double fraction) const;
};

struct LayerEnergy {
  std::string prefix;  // "blocks.0.attn."
  std::string type;    // concat | collaborative
  int64_t heads = 0, key_dim = 0;
  EnergyCurve query, key, products;
};

// The cumulative energy of a matrix's singular values (any shape).
EnergyCurve energy_of_matrix(const Tensor& w);
// The cumulative energy of the stacked products of a layer in nn::Linear
// layout (query/key weight [H·d_k, D]).
EnergyCurve energy_of_products(const Tensor& query_weight, const Tensor& key_weight, int64_t heads);

// Every concat or collaborative attention layer of a checkpoint (a
// collaborative head's product is W̃_Q diag(m_i) W̃_Kᵀ); layers of other
// types are skipped. `path` names the checkpoint in errors.
std::vector<LayerEnergy> checkpoint_head_energy(const run::Checkpoint& ckpt, const std::string& path);

}  // namespace cmha::compress
