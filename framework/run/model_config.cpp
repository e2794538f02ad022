#include "run/model_config.h"

#include <cmath>

#include <yaml-cpp/yaml.h>

#include "nn/attention/registry.h"
#include "optim/schedule.h"

namespace cmha::run {

nn::AttentionConfig attention_config(const Recipe& r, const std::string& prefix) {
  nn::AttentionConfig c;
  for (const nn::AttentionKey& k : nn::attention_keys()) {
    const std::string path = prefix + "." + k.name;
    switch (k.type) {
      case nn::AttentionKeyType::integer: nn::set_attention_key(c, k, r.integer(path)); break;
      case nn::AttentionKeyType::real: nn::set_attention_key(c, k, r.real(path)); break;
      case nn::AttentionKeyType::boolean: nn::set_attention_key(c, k, r.boolean(path)); break;
      case nn::AttentionKeyType::string: nn::set_attention_key(c, k, r.string(path)); break;
    }
  }
  return c;
}

nn::LayerAttention layer_attention_configs(const Recipe& r, const std::string& prefix) {
  const nn::AttentionConfig place = attention_config(r, prefix);
  nn::LayerAttention out;
  for (const auto& kv : r.layer_map(prefix + ".layers")) {
    nn::AttentionConfig c = place;
    for (const auto& setting : kv.second) {
      const nn::AttentionKey& k = *nn::find_attention_key(setting.first.Scalar());
      switch (k.type) {
        case nn::AttentionKeyType::integer: nn::set_attention_key(c, k, setting.second.as<int64_t>()); break;
        case nn::AttentionKeyType::real: nn::set_attention_key(c, k, setting.second.as<double>()); break;
        case nn::AttentionKeyType::boolean: nn::set_attention_key(c, k, setting.second.as<bool>()); break;
        case nn::AttentionKeyType::string: nn::set_attention_key(c, k, setting.second.as<std::string>()); break;
      }
    }
    out[kv.first.as<int64_t>()] = c;
  }
  return out;
}

nn::AttentionConfig attention_config(const Recipe& r, const std::string& prefix, int64_t layer) {
  return nn::attention_for_layer(attention_config(r, prefix), layer_attention_configs(r, prefix), layer);
}

nn::TransformerConfig transformer_config(const Recipe& r) {
  nn::TransformerConfig c;
  c.src_vocab = c.tgt_vocab = r.integer("model.vocab_size");
  c.d_model = r.integer("model.d_model");
  c.ffn_dim = r.integer("model.ffn_dim");
  c.encoder_layers = r.integer("model.encoder_layers");
  c.decoder_layers = r.integer("model.decoder_layers");
  c.encoder_attention = attention_config(r, "model.encoder_attention");
  c.decoder_attention = attention_config(r, "model.decoder_attention");
  c.cross_attention = attention_config(r, "model.cross_attention");
  c.encoder_attention_layers = layer_attention_configs(r, "model.encoder_attention");
  c.decoder_attention_layers = layer_attention_configs(r, "model.decoder_attention");
  c.cross_attention_layers = layer_attention_configs(r, "model.cross_attention");
  c.pre_norm = r.boolean("model.pre_norm");
  c.encoder_final_norm = r.boolean("model.encoder_final_norm");
  c.decoder_final_norm = r.boolean("model.decoder_final_norm");
  c.dropout = static_cast<float>(r.real("model.dropout"));
  c.activation_dropout = static_cast<float>(r.real("model.activation_dropout"));
  c.activation = r.string("model.activation");
  c.share_all_embeddings = r.boolean("model.share_all_embeddings");
  c.share_decoder_output = c.share_all_embeddings;
  c.scale_embedding = r.boolean("model.scale_embedding");
  c.positions = r.string("model.positions");
  c.max_positions = r.integer("model.max_positions");
  c.position_offset = r.integer("model.position_offset");
  c.layer_norm_eps = static_cast<float>(r.real("model.layer_norm_eps"));
  return c;
}

nn::VitConfig vit_config(const Recipe& r) {
  nn::VitConfig c;
  c.image_size = r.integer("model.image_size");
  c.patch_size = r.integer("model.patch_size");
  c.channels = r.integer("model.channels");
  c.num_classes = r.integer("model.num_classes");
  c.d_model = r.integer("model.d_model");
  c.depth = r.integer("model.depth");
  c.ffn_dim = r.integer("model.ffn_dim");
  c.attention = attention_config(r, "model.attention");
  c.attention_layers = layer_attention_configs(r, "model.attention");
  c.dropout = static_cast<float>(r.real("model.dropout"));
  c.drop_path = static_cast<float>(r.real("model.drop_path"));
  c.distillation_token = r.boolean("model.distillation_token");
  c.layer_norm_eps = static_cast<float>(r.real("model.layer_norm_eps"));
  return c;
}

optim::OptimizerOptions optimizer_options(const Recipe& r) {
  optim::OptimizerOptions o;
  o.name = r.string("optim.name");
  o.lr = r.real("optim.lr");
  o.betas = r.reals("optim.betas");
  o.eps = r.real("optim.eps");
  o.momentum = r.real("optim.momentum");
  o.nesterov = r.boolean("optim.nesterov");
  o.weight_decay = r.real("optim.weight_decay");
  return o;
}

double peak_lr(const Recipe& r, int world) {
  const int64_t reference = r.integer("optim.lr_scale_batch");
  if (reference == 0) return r.real("optim.lr");
  // Only a task with a fixed number of samples per batch has a batch to scale by: the key is
  // read only by image_classification (run/options.cpp), so the recipe refused it elsewhere.
  const int64_t global = r.integer("data.batch_size") * r.integer("train.update_freq") * world;
  return r.real("optim.lr") * static_cast<double>(global) / static_cast<double>(reference);
}

int64_t warmup_length(const Recipe& r, int64_t updates_per_epoch) {
  const double epochs = r.real("lr.warmup_epochs");
  if (epochs <= 0) return r.integer("lr.warmup");
  if (r.boolean("lr.per_epoch")) {
    CMHA_CHECK(epochs == std::floor(epochs), "lr.warmup_epochs must be whole epochs with lr.per_epoch, got " +
                                                 std::to_string(epochs));
    return static_cast<int64_t>(epochs);
  }
  return static_cast<int64_t>(std::llround(epochs * static_cast<double>(updates_per_epoch)));
}

std::unique_ptr<optim::LrSchedule> make_schedule(const Recipe& r, int64_t updates_per_epoch, int world) {
  optim::ScheduleOptions o;
  o.kind = optim::parse_schedule_kind(r.string("lr.schedule"));
  o.lr = peak_lr(r, world);
  o.warmup = warmup_length(r, updates_per_epoch);
  o.warmup_init_lr = r.real("lr.warmup_init_lr");
  o.factor = r.real("lr.noam_factor");
  o.d_model = r.integer("model.d_model");
  o.lr_min = r.real("lr.min_lr");
  o.per_epoch = r.boolean("lr.per_epoch");
  o.total = r.integer("lr.total");
  if (o.total == 0)
    o.total = o.per_epoch ? r.integer("train.max_epochs")
                          : (r.integer("train.max_updates") > 0 ? r.integer("train.max_updates")
                                                                 : r.integer("train.max_epochs") * updates_per_epoch);
  if (o.kind != optim::ScheduleKind::cosine) o.total = 0;
  return std::make_unique<optim::LrSchedule>(o);
}

void check_schedule_before_data(const Recipe& r, int world) {
  if (r.real("lr.warmup_epochs") > 0) return;  // counted in epochs: their length comes from the data
  const bool cosine = optim::parse_schedule_kind(r.string("lr.schedule")) == optim::ScheduleKind::cosine;
  if (cosine && r.integer("lr.total") == 0 && !r.boolean("lr.per_epoch") && r.integer("train.max_updates") == 0)
    return;  // the cosine spans max_epochs × the epoch's updates
  (void)make_schedule(r, /*updates_per_epoch=*/1, world);  // LrSchedule's constructor checks its options
}

namespace {

// Keys that define the architecture: a resumed or fine-tuned run must agree on them.
std::string architecture_of(const Recipe& recipe) {
  YAML::Node model = YAML::Load(recipe.dump())["model"];
  model.remove("dropout");
  model.remove("activation_dropout");
  model.remove("drop_path");
  // Initialisation-only keys: the weights replace whatever they drew.
  const YAML::Node& places = model;  // const: looking a place up must not add it
  for (const nn::AttentionPlace& place : nn::attention_places())
    if (YAML::Node group = places[place.name])
      for (const nn::AttentionKey& key : nn::attention_keys()) {
        if (!key.init_only) continue;
        group.remove(key.name);
        const YAML::Node& read = group;  // const: looking "layers" up must not add it
        if (YAML::Node layers = read["layers"]; layers && layers.IsMap())
          for (auto layer : layers) layer.second.remove(key.name);
      }
  return YAML::Dump(model);
}

}  // namespace

bool same_architecture(const std::string& stored_recipe, const std::string& path, const Recipe& r) {
  return architecture_of(Recipe::parse_stored(stored_recipe, path + " (recipe)")) == architecture_of(r);
}

}  // namespace cmha::run
