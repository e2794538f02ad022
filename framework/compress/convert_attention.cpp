#include "compress/convert_attention.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

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
  for (const nn::AttentionPlace& p : nn::attention_places()) {
    if (p.model_kind != r.string("model.kind")) continue;
    const int64_t layers = r.integer("model." + p.layers);
    std::vector<nn::AttentionConfig> configs;
    for (int64_t i = 0; i < layers; ++i) configs.push_back(run::attention_config(r, "model." + p.name, i));
    out.push_back({p.name, layer_prefixes(p.weight_prefix, layers), std::move(configs), &p});
  }
  return out;
}

namespace {
bool has_concat_layer(const AttentionPlace& p) {
  for (const auto& c : p.configs)
    if (c.type == "concat") return true;
  return false;
}
}  // namespace

std::vector<AttentionPlace> select_places(const run::Recipe& r, const std::vector<std::string>& names) {
  const std::vector<AttentionPlace> all = attention_places(r);
  std::vector<AttentionPlace> out;
  if (names.empty()) {
    for (const auto& p : all)
      if (has_concat_layer(p)) out.push_back(p);
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
    CMHA_CHECK(has_concat_layer(*found), "--layers " + n + ": " + found->key() + ".type is " + type +
                                             "; only concat attention can be compressed, and no layer of it is concat");
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

void parse_key_dims(const std::string& text, CompressOptions& opt) {
  std::stringstream ss(text);
  bool any = false;
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    any = true;
    const auto eq = item.find('='), dot = item.find('.');
    auto dim = [&](const std::string& d) {
      size_t used = 0;
      int64_t v = 0;
      try {
        v = std::stoll(d, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      CMHA_CHECK(used == d.size() && v >= 1 && v <= (1 << 20),
                 "option '--key-dim' needs a whole number from 1 to 1048576 as D~k, not '" + d + "'");
      return v;
    };
    if (eq == std::string::npos) {
      CMHA_CHECK(opt.shared_dim == 0, "--key-dim gives the D~k of every layer twice ('" + item +
                                          "'); give one, and PLACE.LAYER=D for the layers that differ");
      opt.shared_dim = dim(item);
      continue;
    }
    CMHA_CHECK(dot != std::string::npos && dot < eq,
               "--key-dim: '" + item + "' must look like PLACE.LAYER=D (encoder.0=64) or D");
    const std::string layer = item.substr(dot + 1, eq - dot - 1);
    CMHA_CHECK(!layer.empty() && layer.find_first_not_of("0123456789") == std::string::npos && layer.size() < 10,
               "--key-dim: '" + item + "': '" + layer + "' is not a layer index (a whole number from 0)");
    LayerKeyDim l{item.substr(0, dot), std::stoll(layer), dim(item.substr(eq + 1))};
    for (const auto& o : opt.layers)
      CMHA_CHECK(o.place != l.place || o.layer != l.layer, "--key-dim names " + l.place + "." + layer + " twice");
    opt.layers.push_back(l);
  }
  CMHA_CHECK(any, "--key-dim needs D~k, e.g. --key-dim 64 or --key-dim encoder.0=128,64");
}

namespace {

// The D̃k each layer of each place gets (0 = left as it is), from opt.
std::vector<std::vector<int64_t>> layer_targets(const run::Recipe& r, const std::vector<AttentionPlace>& places,
                                                const CompressOptions& opt) {
  std::vector<std::vector<int64_t>> out;
  for (const AttentionPlace& p : places) {
    std::vector<int64_t> dims(p.configs.size(), 0);
    for (size_t i = 0; i < dims.size(); ++i)
      if (p.configs[i].type == "concat") dims[i] = opt.shared_dim;
    out.push_back(dims);
  }
  for (const LayerKeyDim& l : opt.layers) {
    const std::vector<AttentionPlace> named = select_places(r, {l.place});
    size_t at = places.size();
    for (size_t i = 0; i < places.size(); ++i)
      if (places[i].name == named.front().name) at = i;
    CMHA_CHECK(at < places.size(), "--key-dim " + l.place + "." + std::to_string(l.layer) + ": --layers leaves the place '" +
                                       l.place + "' out");
    const AttentionPlace& p = places[at];
    const int64_t n = static_cast<int64_t>(p.configs.size());
    CMHA_CHECK(l.layer < n, "--key-dim " + l.place + "." + std::to_string(l.layer) + ": there is no layer " +
                                std::to_string(l.layer) + ": " + p.key() + " has " + std::to_string(n) + " layers (0 to " +
                                std::to_string(n - 1) + ")");
    const std::string& type = p.configs[static_cast<size_t>(l.layer)].type;
    CMHA_CHECK(type == "concat", "--key-dim " + l.place + "." + std::to_string(l.layer) + ": that layer is " + type +
                                     "; only concat attention can be compressed");
    out[at][static_cast<size_t>(l.layer)] = l.shared_dim;
  }
  return out;
}

// `layers` (a normalized model.<place>.layers) with `set` written into layer `layer`'s entry.
void set_layer_keys(YAML::Node& layers, int64_t layer, const std::vector<std::pair<std::string, std::string>>& set) {
  YAML::Node entry = layers[layer] ? layers[layer] : YAML::Node(YAML::NodeType::Map);
  for (const auto& [k, v] : set) entry[k] = YAML::Load(v);
  layers[layer] = entry;
}

}  // namespace

run::Checkpoint compress_checkpoint(const run::Checkpoint& in, const std::string& path, const CompressOptions& opt,
                                      const std::function<void(const LayerReport&)>& on_layer) {
  CMHA_CHECK(opt.shared_dim > 0 || !opt.layers.empty(), "the shared key width D̃k must be positive, got " +
                                                            std::to_string(opt.shared_dim));
  const run::Recipe recipe = run::Recipe::parse_stored(in.recipe, path + " (recipe)");
  const int64_t d_model = recipe.integer("model.d_model");
  run::Checkpoint out;
  out.weights = in.weights;
  std::vector<std::string> overrides;
  const std::vector<AttentionPlace> places = select_places(recipe, opt.places);
  const std::vector<std::vector<int64_t>> targets = layer_targets(recipe, places, opt);
  for (size_t pi = 0; pi < places.size(); ++pi) {
    const AttentionPlace& place = places[pi];
    const std::vector<int64_t>& target = targets[pi];
    // The place's layers to decompose go side by side (cp_als_layers); each
    // reports the seconds of its own decomposition (on its thread).
    std::vector<HeadProducts> layers;
    std::vector<size_t> decomposed;
    std::vector<CpOptions> als_of;
    for (size_t i = 0; i < place.prefixes.size(); ++i) {
      if (target[i] == 0) continue;
      HeadProducts x = layer_products(out.weights, place.prefixes[i], place.configs[i].heads);
      if (target[i] < x.key_dim()) layers.push_back(std::move(x)), decomposed.push_back(i);
    }
    // cp_als_layers takes one rank: the layers of one D̃k go together.
    std::vector<CpResult> results(layers.size());
    std::vector<int64_t> ranks;
    for (size_t j = 0; j < layers.size(); ++j)
      if (std::find(ranks.begin(), ranks.end(), target[decomposed[j]]) == ranks.end()) ranks.push_back(target[decomposed[j]]);
    for (const int64_t rank : ranks) {
      std::vector<HeadProducts> group;
      std::vector<size_t> where;
      for (size_t j = 0; j < layers.size(); ++j)
        if (target[decomposed[j]] == rank) group.push_back(layers[j]), where.push_back(j);
      CpOptions als = opt.als;
      als.rank = rank;
      const std::vector<CpResult> done = cp_als_layers(group, als);
      for (size_t g = 0; g < where.size(); ++g) results[where[g]] = done[g];
    }
    std::vector<int64_t> written(place.prefixes.size(), 0);
    size_t next = 0;
    for (size_t i = 0; i < place.prefixes.size(); ++i) {
      if (target[i] == 0) continue;
      const std::string& prefix = place.prefixes[i];
      const bool cp = next < decomposed.size() && decomposed[next] == i;
      const HeadProducts x = cp ? layers[next] : layer_products(out.weights, prefix, place.configs[i].heads);
      const CpResult* res = cp ? &results[next] : nullptr;
      const LayerReport rep = write_layer(out.weights, prefix, x, res, res ? res->wall_seconds : 0.0);
      next += cp ? 1 : 0;
      written[i] = rep.shared_dim;
      if (on_layer) on_layer(rep);
    }
    auto scale_of = [&](size_t i) {
      char scale[64];
      std::snprintf(scale, sizeof scale, "%.9g", concat_scale(place.configs[i], d_model));
      return std::string(scale);
    };
    // One D̃k for every layer of a place without per-layer settings: the place's keys say it.
    const bool uniform = recipe.layer_map(place.key() + ".layers").size() == 0 &&
                         std::all_of(written.begin(), written.end(), [&](int64_t w) { return w == written.front(); });
    if (uniform && !written.empty() && written.front() > 0) {
      overrides.push_back(place.key() + ".type=collaborative");
      overrides.push_back(place.key() + ".key_dim=" + std::to_string(written.front()));
      overrides.push_back(place.key() + ".scale=" + scale_of(0));
      // The concatenate initialisation needs D̃k divisible by the heads; the
      // weights replace any initialisation, so only the check matters.
      if (written.front() % place.configs[0].heads != 0) overrides.push_back(place.key() + ".mixing_init=normal");
      continue;
    }
    YAML::Node per_layer = recipe.layer_map(place.key() + ".layers");
    bool changed = false;
    for (size_t i = 0; i < written.size(); ++i) {
      if (written[i] == 0) continue;
      changed = true;
      std::vector<std::pair<std::string, std::string>> set{
          {"type", "collaborative"}, {"key_dim", std::to_string(written[i])}, {"scale", scale_of(i)}};
      if (written[i] % place.configs[i].heads != 0) set.push_back({"mixing_init", "normal"});
      set_layer_keys(per_layer, static_cast<int64_t>(i), set);
    }
    if (!changed) continue;
    YAML::Emitter flow;
    flow << YAML::Flow << per_layer;
    overrides.push_back(place.key() + ".layers=" + flow.c_str());
  }
  out.recipe = run::Recipe::parse_stored(in.recipe, path + " (recipe)", overrides).dump();
  out.trainer = in.trainer;
  out.trainer["compressed_from"] = path;
  return out;
}

}  // namespace cmha::compress
