#include "compress/head_telemetry.h"

#include <algorithm>
#include <cmath>

#include "compress/head_energy.h"
#include "nn/attention/collaborative.h"
#include "nn/attention/concat.h"
#include "nn/head_mask.h"
#include "nn/transformer.h"
#include "nn/vit.h"

namespace cmha::compress {

namespace {

Tensor host(const Tensor& t) { return t.to(Device::cpu()).to(DType::f32).contiguous(); }

// exp(entropy) of the singular values normalized to sum 1, from the energy
// shares (σ_i² / Σσ²) of an EnergyCurve.
double effective_rank(const EnergyCurve& c) {
  std::vector<double> sigma;
  double previous = 0, total = 0;
  for (const double cum : c.cumulative) {
    sigma.push_back(std::sqrt(std::max(cum - previous, 0.0)));
    total += sigma.back();
    previous = cum;
  }
  if (total <= 0) return 0.0;
  double entropy = 0;
  for (const double s : sigma)
    if (s > 0) entropy -= (s / total) * std::log(s / total);
  return std::exp(entropy);
}

}  // namespace

nlohmann::json head_telemetry(nn::Module& model) {
  nlohmann::json row = nlohmann::json::object();
  if (!dynamic_cast<nn::Transformer*>(&model) && !dynamic_cast<nn::VisionTransformer*>(&model)) return row;
  for (const nn::AttentionLayer& l : nn::attention_layers(model)) {
    const std::string name = l.place + "." + std::to_string(l.layer) + "/";
    if (const auto* c = dynamic_cast<const nn::CollaborativeAttention*>(l.attention)) {
      const EnergyCurve q = energy_of_matrix(host(c->query_proj->weight));
      const EnergyCurve k = energy_of_matrix(host(c->key_proj->weight));
      row[name + "q90"] = q.dims_for(0.90);
      row[name + "q99"] = q.dims_for(0.99);
      row[name + "k90"] = k.dims_for(0.90);
      row[name + "k99"] = k.dims_for(0.99);
      const Tensor m = host(c->mixing);  // [H, D̃k]
      const int64_t H = m.size(0), R = m.size(1);
      std::vector<double> norms(static_cast<size_t>(R), 0.0);
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < R; ++j) norms[static_cast<size_t>(j)] += std::pow(m.data<float>()[h * R + j], 2.0);
      double low = INFINITY, high = 0;
      for (double& n : norms) low = std::min(low, n = std::sqrt(n)), high = std::max(high, n);
      row[name + "mixing_erank"] = effective_rank(energy_of_matrix(m));
      row[name + "mixing_norm_min"] = low;
      row[name + "mixing_norm_max"] = high;
      row[name + "mixing_norms"] = norms;
    } else if (const auto* c = dynamic_cast<const nn::ConcatAttention*>(l.attention)) {
      const EnergyCurve p = energy_of_products(host(c->query_proj->weight),
                                                                   host(c->key_proj->weight), c->config().heads);
      row[name + "qk90"] = p.dims_for(0.90);
      row[name + "qk99"] = p.dims_for(0.99);
    }
  }
  return row;
}

}  // namespace cmha::compress
