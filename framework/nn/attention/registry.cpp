#include "nn/attention/registry.h"

#include <set>

#include "tensor/error.h"

namespace cmha::nn {

// The attention types, in the order recipes and `cmha train --help` list them
// (the first is attention.type's default). Adding a type is one line here:
// X(<name>) calls `AttentionType <name>_attention_type()` of its .cpp.
#define CMHA_ATTENTION_TYPES(X) \
  X(concat)                     \
  X(collaborative)              \
  X(talking_heads)              \
  X(grouped)                    \
  /* a new type: one line above this one */

#define CMHA_DECLARE_ATTENTION_TYPE(name) AttentionType name##_attention_type();
CMHA_ATTENTION_TYPES(CMHA_DECLARE_ATTENTION_TYPE)
#undef CMHA_DECLARE_ATTENTION_TYPE

namespace {

using K = AttentionKeyType;

// The keys every type reads (type's choices are filled in from the types).
std::vector<AttentionKey> shared_keys() {
  return {
      {.name = "type", .type = K::string, .default_value = "", .help = "Attention type",
       .field = &AttentionConfig::type},
      {.name = "heads", .type = K::integer, .default_value = "8", .help = "Number of attention heads", .min = 1,
       .max = 4096, .field = &AttentionConfig::heads},
      {.name = "key_dim", .type = K::integer, .default_value = "0",
       .help = "Total query/key width D_k (D̃k for collaborative); 0 = d_model", .min = 0, .max = 1 << 20,
       .field = &AttentionConfig::key_dim},
      {.name = "value_dim", .type = K::integer, .default_value = "0", .help = "Total value width; 0 = d_model",
       .min = 0, .max = 1 << 20, .field = &AttentionConfig::value_dim},
      {.name = "bias", .type = K::boolean, .default_value = "true",
       .help = "Biases in the projections (collaborative: value and output only)", .field = &AttentionConfig::bias},
      {.name = "dropout", .type = K::real, .default_value = "0.0", .help = "Dropout on the attention weights",
       .min = 0, .max = 0.999, .field = &AttentionConfig::dropout},
      {.name = "scale", .type = K::real, .default_value = "0.0", .help = "Score scale; 0 = the type's default",
       .min = 0, .field = &AttentionConfig::scale},
  };
}

// The member type a key's type needs (the index of AttentionField's alternative).
size_t field_index(AttentionKeyType t) {
  switch (t) {
    case K::integer: return 1;
    case K::real: return 2;
    case K::boolean: return 3;
    case K::string: return 4;
  }
  return 0;
}

std::vector<AttentionType> build_types() {
  std::vector<AttentionType> types{
#define CMHA_ATTENTION_TYPE_ENTRY(name) name##_attention_type(),
      CMHA_ATTENTION_TYPES(CMHA_ATTENTION_TYPE_ENTRY)
#undef CMHA_ATTENTION_TYPE_ENTRY
  };
  std::set<std::string> names, keys;
  for (const AttentionKey& k : shared_keys()) keys.insert(k.name);
  for (const AttentionType& t : types) {
    CMHA_CHECK(!t.name.empty() && t.make != nullptr, "attention registry: a type without a name or a factory");
    CMHA_CHECK(names.insert(t.name).second, "attention registry: type '" + t.name + "' is registered twice");
    for (const AttentionKey& k : t.keys) {
      CMHA_CHECK(keys.insert(k.name).second, "attention registry: key '" + k.name + "' of type '" + t.name +
                                                 "' is already registered");
      CMHA_CHECK(k.field.index() == 0 || k.field.index() == field_index(k.type),
                 "attention registry: key '" + k.name + "' is kept in an AttentionConfig member of another type");
    }
  }
  return types;
}

std::vector<AttentionKey> build_keys() {
  std::vector<AttentionKey> keys = shared_keys();
  keys.front().default_value = attention_types().front().name;
  for (const AttentionType& t : attention_types()) {
    keys.front().choices.push_back(t.name);
    keys.insert(keys.end(), t.keys.begin(), t.keys.end());
  }
  return keys;
}

}  // namespace

const std::vector<AttentionType>& attention_types() {
  static const std::vector<AttentionType> types = build_types();
  return types;
}

const AttentionType* find_attention_type(const std::string& name) {
  for (const AttentionType& t : attention_types())
    if (t.name == name) return &t;
  return nullptr;
}

std::string attention_type_list() {
  const auto& types = attention_types();
  std::string out;
  for (size_t i = 0; i < types.size(); ++i)
    out += (i == 0 ? "" : i + 1 == types.size() ? " or " : ", ") + types[i].name;
  return out;
}

const std::vector<AttentionKey>& attention_keys() {
  static const std::vector<AttentionKey> keys = build_keys();
  return keys;
}

const AttentionKey* find_attention_key(const std::string& name) {
  for (const AttentionKey& k : attention_keys())
    if (k.name == name) return &k;
  return nullptr;
}

void set_attention_key(AttentionConfig& cfg, const AttentionKey& key, const AttentionValue& value) {
  CMHA_CHECK(value.index() == field_index(key.type) - 1, "attention key '" + key.name + "': a value of another type");
  struct Store {
    AttentionConfig& cfg;
    const AttentionKey& key;
    const AttentionValue& value;
    void operator()(std::monostate) const { cfg.extra[key.name] = value; }
    void operator()(int64_t AttentionConfig::*m) const { cfg.*m = std::get<int64_t>(value); }
    void operator()(float AttentionConfig::*m) const { cfg.*m = static_cast<float>(std::get<double>(value)); }
    void operator()(bool AttentionConfig::*m) const { cfg.*m = std::get<bool>(value); }
    void operator()(std::string AttentionConfig::*m) const { cfg.*m = std::get<std::string>(value); }
  };
  std::visit(Store{cfg, key, value}, key.field);
}

AttentionValue default_attention_value(const AttentionKey& key) {
  const std::string& text = key.default_value;
  switch (key.type) {
    case K::integer: return static_cast<int64_t>(std::stoll(text));
    case K::real: return std::stod(text);
    case K::boolean: return text == "true";
    case K::string: return text == "''" || text == "\"\"" ? std::string() : text;
  }
  return text;
}

template <typename T>
T AttentionConfig::extra_value(const std::string& name) const {
  auto it = extra.find(name);
  if (it == extra.end()) {
    const AttentionKey* key = find_attention_key(name);
    CMHA_CHECK(key != nullptr, "attention: no key '" + name + "' is registered");
    return std::get<T>(default_attention_value(*key));
  }
  CMHA_CHECK(std::holds_alternative<T>(it->second), "attention: key '" + name + "' holds a value of another type");
  return std::get<T>(it->second);
}
template int64_t AttentionConfig::extra_value<int64_t>(const std::string&) const;
template double AttentionConfig::extra_value<double>(const std::string&) const;
template bool AttentionConfig::extra_value<bool>(const std::string&) const;
template std::string AttentionConfig::extra_value<std::string>(const std::string&) const;

const AttentionConfig& attention_for_layer(const AttentionConfig& all, const LayerAttention& layers, int64_t layer) {
  const auto it = layers.find(layer);
  return it == layers.end() ? all : it->second;
}

std::shared_ptr<Attention> make_attention(const AttentionConfig& cfg, int64_t d_model, Generator& init_gen) {
  const AttentionType* t = find_attention_type(cfg.type);
  if (!t) throw Error("attention.type '" + cfg.type + "' is unknown; expected " + attention_type_list());
  return t->make(cfg, d_model, init_gen);
}

std::shared_ptr<Attention> make_layer_attention(const AttentionConfig& all, const LayerAttention& layers, int64_t layer,
                                                const std::string& place, int64_t d_model, Generator& init_gen) {
  std::shared_ptr<Attention> a;
  if (layers.count(layer) == 0) {
    a = make_attention(all, d_model, init_gen);
  } else {
    try {
      a = make_attention(layers.at(layer), d_model, init_gen);
    } catch (const Error& e) {
      throw Error(place + ", layer " + std::to_string(layer) + " (its per-layer settings): " + e.what());
    }
  }
  a->set_place(place);
  return a;
}

const std::vector<AttentionPlace>& attention_places() {
  static const std::vector<AttentionPlace> places{
      {.name = "attention", .short_name = "attention", .alias = "vit", .model_kind = "vit", .role = "",
       .inherits = "", .layers = "depth", .weight_prefix = "blocks.#.attn."},
      {.name = "encoder_attention", .short_name = "encoder", .alias = "", .model_kind = "transformer",
       .role = "encoder self-attention", .inherits = "attention", .layers = "encoder_layers",
       .weight_prefix = "encoder.layers.#.self_attn."},
      {.name = "decoder_attention", .short_name = "decoder", .alias = "", .model_kind = "transformer",
       .role = "decoder self-attention", .inherits = "attention", .layers = "decoder_layers",
       .weight_prefix = "decoder.layers.#.self_attn."},
      {.name = "cross_attention", .short_name = "cross", .alias = "", .model_kind = "transformer",
       .role = "decoder cross-attention", .inherits = "attention", .layers = "decoder_layers",
       .weight_prefix = "decoder.layers.#.cross_attn."},
  };
  return places;
}

std::vector<AttentionPlace> attention_places(const std::string& model_kind) {
  std::vector<AttentionPlace> out;
  for (const AttentionPlace& p : attention_places())
    if (p.model_kind == model_kind) out.push_back(p);
  return out;
}

}  // namespace cmha::nn
