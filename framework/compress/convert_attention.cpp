#include "compress/convert_attention.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "nn/attention/registry.h"
#include "run/model_config.h"
#include "tensor/clock.h"
#include "tensor/error.h"

namespace cmha::compress {

namespace {

const Tensor& weight(const std::map<std::string, Tensor>& w, const std::string& name) {
  auto it = w.find(name);
  CMHA_CHECK(it != w.end(), "the checkpoint has no tensor '" + name + "' that a concat attention layer needs");
  return it->second;
}

// The weight-name prefixes of `layers` layers, '#' standing for the layer index.
std::vector<std::string> layer_prefixes(const std::string& pattern, int64_t layers) {
  std::vector<std::string> out;
  const auto at = pattern.find('#');
  for (int64_t i = 0; i < layers; ++i) out.push_back(pattern.substr(0, at) + std::to_string(i) + pattern.substr(at + 1));
  return out;
}

// The score scale the layer had: its explicit scale, else concat's default 1/√(D_k/H).
double concat_scale(const nn::AttentionConfig& a, int64_t d_model) {
  if (a.scale > 0) return a.scale;
  const int64_t key_dim = a.key_dim > 0 ? a.key_dim : d_model;
  return 1.0 / std::sqrt(static_cast<double>(key_dim / a.heads));
}

}  // namespace

std::vector<AttentionPlace> attention_places(const run::Recipe& r) {
  std::vector<AttentionPlace> out;
  for (const nn::AttentionPlace& p : nn::attention_places())
    if (p.model_kind == r.string("model.kind"))
      out.push_back({p.name, layer_prefixes(p.weight_prefix, r.integer("model." + p.layers)), &p});
  return out;
}

std::vector<AttentionPlace> select_places(const run::Recipe& r, const std::vector<std::string>& names) {
  const std::vector<AttentionPlace> all = attention_places(r);
  std::vector<AttentionPlace> out;
  if (names.empty()) {
    for (const auto& p : all)
      if (!p.prefixes.empty() && r.string(p.key() + ".type") == "concat") out.push_back(p);
    CMHA_CHECK(!out.empty(), "the model has no concat attention layer to compress");
    return out;
  }
  for (const std::string& n : names) {
    const AttentionPlace* found = nullptr;
    std::string known;
    for (const auto& p : all) {
      const nn::AttentionPlace& place = *p.place;
      if (n == place.name || n == place.short_name || (!place.alias.empty() && n == place.alias)) found = &p;
      known += (known.empty() ? "" : ", ") + place.short_name;
    }
    CMHA_CHECK(found && !found->prefixes.empty(),
               "--layers: this " + r.string("model.kind") + " has no attention place '" + n + "' (it has: " + known + ")");
    const std::string type = r.string(found->key() + ".type");
    CMHA_CHECK(type == "concat", "--layers " + n + ": " + found->key() + ".type is " + type +
                                     "; only concat attention can be compressed");
    for (const auto& o : out) CMHA_CHECK(o.name != found->name, "--layers names '" + n + "' twice");
    out.push_back(*found);
  }
  return out;
}

namespace {

// The layer's products, by name.
HeadProducts layer_products(const std::map<std::string, Tensor>& weights, const std::string& prefix, int64_t heads) {
  const Tensor& wq = weight(weights, prefix + "query.weight");  // the query's absence is named first
  const Tensor& wk = weight(weights, prefix + "key.weight");
  return make_head_products(wq, wk, heads, "layer '" + prefix + "'");
}

// The rest of convert_layer once the factors are known: `res` is the CP-ALS
// result, or null for the exact concatenate factorisation.
LayerReport write_layer(std::map<std::string, Tensor>& weights, const std::string& prefix, const HeadProducts& x,
                        const CpResult* res, double seconds_so_far) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t D = x.dim(), Dk = x.key_dim(), dk = x.head_dim(), heads = x.heads;
  LayerReport rep;
  rep.prefix = prefix;
  rep.key_dim = Dk;
  CpFactors f;
  if (!res) {
    f = concatenate_factors(x);
    rep.exact = true;
    rep.error = relative_error(x, f);
  } else {
    f = res->factors;
    rep.iterations = res->iterations;
    rep.error = res->error;
  }
  rep.shared_dim = f.rank();
  // Content bias, one row per head: c_i = Σ_{j in head i} b_Q[j] · W_K[j, :]  ([H, D]).
  Tensor content = Tensor::zeros({heads, D});
  auto bq = weights.find(prefix + "query.bias");
  if (bq != weights.end()) {
    const Tensor b = bq->second.contiguous();
    CMHA_CHECK(b.dim() == 1 && b.size(0) == Dk, "layer '" + prefix + "': query.bias is " + shape_str(b.shape()) +
                                                     ", expected [" + std::to_string(Dk) + "]");
    const float* pb = b.data<float>();
    const float* pk = x.key.data<float>();
    float* pc = content.data<float>();
    for (int64_t j = 0; j < Dk; ++j)
      for (int64_t d = 0; d < D; ++d) pc[(j / dk) * D + d] += pb[j] * pk[j * D + d];
  }
  weights.erase(prefix + "query.bias");
  weights.erase(prefix + "key.bias");
  weights[prefix + "query.weight"] = f.query.transpose(0, 1).contiguous();  // [D̃k, D]
  weights[prefix + "key.weight"] = f.key.transpose(0, 1).contiguous();
  weights[prefix + "mixing"] = f.mixing;                                    // [H, D̃k]
  weights[prefix + "content_bias.weight"] = content;
  rep.seconds = seconds_so_far + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return rep;
}

}  // namespace

LayerReport convert_layer(std::map<std::string, Tensor>& weights, const std::string& prefix, int64_t heads,
                          int64_t shared_dim, const CpOptions& als) {
  const auto start = std::chrono::steady_clock::now();
  const HeadProducts x = layer_products(weights, prefix, heads);
  if (shared_dim >= x.key_dim()) return write_layer(weights, prefix, x, nullptr, seconds_since(start));
  CpOptions o = als;
  o.rank = shared_dim;
  const CpResult res = cp_als(x, o);
  return write_layer(weights, prefix, x, &res, seconds_since(start));
}

run::Checkpoint compress_checkpoint(const run::Checkpoint& in, const std::string& path, const CompressOptions& opt,
                                      const std::function<void(const LayerReport&)>& on_layer) {
  CMHA_CHECK(opt.shared_dim > 0, "the shared key width D̃k must be positive, got " + std::to_string(opt.shared_dim));
  const run::Recipe recipe = run::Recipe::parse_stored(in.recipe, path + " (recipe)");
  const int64_t d_model = recipe.integer("model.d_model");
  run::Checkpoint out;
  out.weights = in.weights;
  std::vector<std::string> overrides;
  for (const AttentionPlace& place : select_places(recipe, opt.places)) {
    const nn::AttentionConfig a = run::attention_config(recipe, place.key());
    // The place's layers to decompose go side by side (cp_als_layers); each
    // reports the seconds of its own decomposition (on its thread).
    std::vector<HeadProducts> layers;
    std::vector<const std::string*> decomposed;
    for (const std::string& prefix : place.prefixes) {
      HeadProducts x = layer_products(out.weights, prefix, a.heads);
      if (opt.shared_dim < x.key_dim()) layers.push_back(std::move(x)), decomposed.push_back(&prefix);
    }
    CpOptions als = opt.als;
    als.rank = opt.shared_dim;
    const std::vector<CpResult> results = cp_als_layers(layers, als);
    int64_t written = 0;
    size_t next = 0;
    for (const std::string& prefix : place.prefixes) {
      const bool cp = next < decomposed.size() && decomposed[next] == &prefix;
      const HeadProducts x = cp ? layers[next] : layer_products(out.weights, prefix, a.heads);
      const CpResult* res = cp ? &results[next] : nullptr;
      const LayerReport rep = write_layer(out.weights, prefix, x, res, res ? res->wall_seconds : 0.0);
      next += cp ? 1 : 0;
      written = rep.shared_dim;
      if (on_layer) on_layer(rep);
    }
    char scale[64];
    std::snprintf(scale, sizeof scale, "%.9g", concat_scale(a, d_model));
    overrides.push_back(place.key() + ".type=collaborative");
    overrides.push_back(place.key() + ".key_dim=" + std::to_string(written));
    overrides.push_back(place.key() + ".scale=" + scale);
    // The concatenate initialisation needs D̃k divisible by the heads; the
    // weights replace any initialisation, so only the check matters.
    if (written % a.heads != 0) overrides.push_back(place.key() + ".mixing_init=normal");
  }
  out.recipe = run::Recipe::parse_stored(in.recipe, path + " (recipe)", overrides).dump();
  out.trainer = in.trainer;
  out.trainer["compressed_from"] = path;
  return out;
}

}  // namespace cmha::compress
