#include "compress/head_energy.h"

#include <algorithm>

#include "compress/convert_attention.h"
#include "compress/cp_als.h"
#include "compress/dense_linalg.h"
#include "run/model_config.h"
#include "tensor/error.h"

namespace cmha::compress {

namespace {

EnergyCurve cumulative_energy(std::vector<double> eigenvalues) {
  EnergyCurve c;
  double total = 0;
  for (double& e : eigenvalues) total += (e = std::max(e, 0.0));  // a PSD Gram's rounding may dip below 0
  double run = 0;
  for (double e : eigenvalues) c.cumulative.push_back(total > 0 ? (run += e) / total : 0.0);
  return c;
}

const Tensor& tensor_at(const std::map<std::string, Tensor>& w, const std::string& name, const std::string& path) {
  auto it = w.find(name);
  CMHA_CHECK(it != w.end(), "checkpoint '" + path + "' has no tensor '" + name + "' that its recipe implies");
  return it->second;
}

}  // namespace

int64_t EnergyCurve::dims_for(double fraction) const {
  for (size_t k = 0; k < cumulative.size(); ++k)
    if (cumulative[k] >= fraction - 1e-12) return static_cast<int64_t>(k + 1);
  return static_cast<int64_t>(cumulative.size());
}

EnergyCurve energy_of_matrix(const Tensor& w) {
  const Tensor c = w.contiguous(), t = w.transpose(0, 1).contiguous();
  const int64_t m = c.size(0), n = c.size(1);
  Matrix g;  // the smaller Gram: W Wᵀ [m, m] or Wᵀ W [n, n]
  if (m <= n) gemm_f64(c.data<float>(), n, 1, t.data<float>(), m, m, n, m, g);
  else gemm_f64(t.data<float>(), m, 1, c.data<float>(), n, n, m, n, g);
  return cumulative_energy(symmetric_eigen(g, false).values);
}

EnergyCurve energy_of_products(const Tensor& query_weight, const Tensor& key_weight, int64_t heads) {
  const HeadProducts x = make_head_products(query_weight, key_weight, heads, "energy_of_products");
  return cumulative_energy(symmetric_eigen(unfolding_gram(x.query, x.key, heads), false).values);
}

std::vector<LayerEnergy> checkpoint_head_energy(const run::Checkpoint& ckpt, const std::string& path) {
  const run::Recipe r = run::Recipe::parse_stored(ckpt.recipe, path + " (recipe)");
  std::vector<LayerEnergy> out;
  for (const AttentionPlace& place : attention_places(r)) {
    const nn::AttentionConfig a = run::attention_config(r, place.key());
    if (a.type != "concat" && a.type != "collaborative") continue;
    for (const std::string& prefix : place.prefixes) {
      LayerEnergy e;
      e.prefix = prefix;
      e.type = a.type;
      e.heads = a.heads;
      const Tensor wq = tensor_at(ckpt.weights, prefix + "query.weight", path).contiguous();
      const Tensor wk = tensor_at(ckpt.weights, prefix + "key.weight", path).contiguous();
      e.key_dim = wq.size(0);
      e.query = energy_of_matrix(wq);
      e.key = energy_of_matrix(wk);
      if (a.type == "concat") {
        e.products = energy_of_products(wq, wk, a.heads);
      } else {
        // Head i of a collaborative layer: query rows diag(m_i) W̃_Q, key rows W̃_K.
        const Tensor m = tensor_at(ckpt.weights, prefix + "mixing", path).contiguous();  // [H, D̃k]
        const int64_t R = wq.size(0), D = wq.size(1);
        CMHA_CHECK(m.dim() == 2 && m.size(0) == a.heads && m.size(1) == R,
                   "checkpoint '" + path + "': tensor '" + prefix + "mixing' is " + shape_str(m.shape()) +
                       ", expected [" + std::to_string(a.heads) + ", " + std::to_string(R) + "]");
        Tensor q = Tensor::empty({a.heads * R, D}), k = Tensor::empty({a.heads * R, D});
        for (int64_t h = 0; h < a.heads; ++h)
          for (int64_t j = 0; j < R; ++j)
            for (int64_t d = 0; d < D; ++d) {
              q.data<float>()[(h * R + j) * D + d] = m.data<float>()[h * R + j] * wq.data<float>()[j * D + d];
              k.data<float>()[(h * R + j) * D + d] = wk.data<float>()[j * D + d];
            }
        e.products = energy_of_products(q, k, a.heads);
      }
      out.push_back(std::move(e));
    }
  }
  CMHA_CHECK(!out.empty(), "checkpoint '" + path + "' has no concat or collaborative attention layer to analyse");
  return out;
}

}  // namespace cmha::compress
