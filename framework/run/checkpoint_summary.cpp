#include "run/checkpoint_summary.h"

#include "nn/attention/registry.h"
#include "run/budget.h"
#include "run/model_config.h"

namespace cmha::run {

std::vector<StoredTensor> stored_tensors(const Checkpoint& c) {
  std::vector<StoredTensor> out;
  auto add = [&](const std::map<std::string, Tensor>& group, const std::string& prefix) {
    for (const auto& [name, t] : group) out.push_back({prefix + name, dtype_name(t.dtype()), t.shape()});
  };
  add(c.weights, "");
  add(c.optimizer, "optimizer.");
  add(c.ema, "ema.");
  return out;
}

int64_t parameter_count(const Checkpoint& c) {
  int64_t params = 0;
  for (const auto& [name, t] : c.weights) params += t.numel();
  return params;
}

std::vector<AttentionLayerRow> attention_layer_rows(const Recipe& r) {
  std::vector<AttentionLayerRow> rows;
  const int64_t d = r.integer("model.d_model");
  for (const nn::AttentionPlace& place : nn::attention_places(r.string("model.kind"))) {
    const std::string prefix = "model." + place.name;
    const nn::LayerAttention own = layer_attention_configs(r, prefix);
    for (int64_t i = 0; i < r.integer("model." + place.layers); ++i) {
      AttentionLayerRow row{place.name, i, attention_config(r, prefix, i)};
      row.key_dim = row.attention.key_dim > 0 ? row.attention.key_dim : d;
      row.value_dim = row.attention.value_dim > 0 ? row.attention.value_dim : d;
      row.own = own.count(i) > 0;
      rows.push_back(row);
    }
  }
  return rows;
}

nlohmann::ordered_json checkpoint_summary_json(const std::string& path, const Checkpoint& c, const Recipe& r,
                                               bool tensors) {
  using Json = nlohmann::ordered_json;
  const Json recipe = r.to_json();
  Json attention = Json::object();
  for (const nn::AttentionPlace& place : nn::attention_places(r.string("model.kind")))
    attention[place.name] = recipe["model"][place.name];
  Json j = Json::object();
  j["checkpoint"] = path;
  j["model"] = {{"kind", r.string("model.kind")},
                {"d_model", r.integer("model.d_model")},
                {"parameters", parameter_count(c)},
                {"weight_tensors", c.weights.size()}};
  j["attention"] = attention;
  j["budget"] = budget_json(model_budget(r));
  j["attention_layers"] = Json::array();
  for (const AttentionLayerRow& row : attention_layer_rows(r))
    j["attention_layers"].push_back({{"place", row.place},
                                     {"layer", row.layer},
                                     {"type", row.attention.type},
                                     {"heads", row.attention.heads},
                                     {"key_dim", row.key_dim},
                                     {"value_dim", row.value_dim},
                                     {"own_settings", row.own}});
  j["trainer"] = Json::parse(c.trainer.dump());
  j["optimizer_tensors"] = c.optimizer.size();
  j["ema_tensors"] = c.ema.size();
  j["recipe"] = recipe;
  if (tensors) {
    j["tensors"] = Json::array();
    for (const auto& t : stored_tensors(c))
      j["tensors"].push_back({{"name", t.name}, {"shape", t.shape}, {"dtype", t.dtype}});
  }
  return j;
}

}  // namespace cmha::run
