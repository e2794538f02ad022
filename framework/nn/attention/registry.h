#pragma once
// The one registry of attention: the types (name, factory, recipe keys) and
// the places attention sits in the models. Everything else reads it:
//   make_attention                 builds a type by name
//   run/options.cpp              the recipe keys model.<place>.<key>, with
//                                  type, default, help, range and choices
//   run/model_config.cpp         recipe → AttentionConfig
//   train/trainer.cpp              drops init-only keys when it compares architectures
//   cmha info, cmha compress       walk the places
//
// Adding an attention type touches its own two files and ONE line:
//   attention/<name>.h, <name>.cpp  the class (deriving Attention) and, in the
//                                   .cpp, `AttentionType <name>_attention_type()`
//                                   returning its name, factory and own keys
//   registry.cpp                    `X(<name>)` in CMHA_ATTENTION_TYPES
// A key the type adds without a member of AttentionConfig (AttentionKey::field
// left unset) is kept in AttentionConfig::extra and read with extra_value<T>.
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "nn/attention/attention.h"

namespace cmha::nn {

enum class AttentionKeyType { integer, real, boolean, string };

// Where an AttentionConfig keeps a key: one of its members (whose type must
// match the key's: int64_t integer, float real, bool boolean, std::string
// string), or, when unset, AttentionConfig::extra[name].
using AttentionField = std::variant<std::monostate, int64_t AttentionConfig::*, float AttentionConfig::*,
                                    bool AttentionConfig::*, std::string AttentionConfig::*>;

// One key of model.attention (and of every place, which inherits it).
struct AttentionKey {
  std::string name = {};             // "kv_heads"
  AttentionKeyType type = AttentionKeyType::string;
  std::string default_value = {};    // as YAML text
  std::string help = {};             // one sentence, no final stop
  std::optional<double> min = {};    // numbers: the allowed range; unset = unbounded
  std::optional<double> max = {};
  std::vector<std::string> choices = {};  // strings: the allowed values; empty = any
  bool init_only = false;            // only draws the initial weights: a resumed or fine-tuned run may differ in it
  AttentionField field = {};
};

using AttentionFactory = std::shared_ptr<Attention> (*)(const AttentionConfig& cfg, int64_t d_model,
                                                        Generator& init_gen);
template <typename A>
std::shared_ptr<Attention> construct_attention(const AttentionConfig& cfg, int64_t d_model, Generator& init_gen) {
  return std::make_shared<A>(cfg, d_model, init_gen);
}

struct AttentionType {
  std::string name = {};           // the value of attention.type
  AttentionFactory make = nullptr;
  std::vector<AttentionKey> keys = {};  // the keys only this type reads
  std::string key_dim_note = {};        // how `cmha info` explains key_dim; "" = the total query/key width
};

// Every type, in the order recipes list them; the first is the default.
const std::vector<AttentionType>& attention_types();
const AttentionType* find_attention_type(const std::string& name);
// "concat, collaborative, talking_heads or grouped"
std::string attention_type_list();
// Every key: those of all types (type, heads, key_dim, value_dim, bias,
// dropout, scale), then each type's own, in type order.
const std::vector<AttentionKey>& attention_keys();
const AttentionKey* find_attention_key(const std::string& name);
// Stores `value` (of the key's type; a real into a float member is narrowed) in cfg.
void set_attention_key(AttentionConfig& cfg, const AttentionKey& key, const AttentionValue& value);
// The key's default as a value of its type.
AttentionValue default_attention_value(const AttentionKey& key);

// A place attention sits in a model; the recipe group model.<name> configures it.
struct AttentionPlace {
  std::string name;           // "encoder_attention" (also the model config's member)
  std::string short_name;     // "encoder": what `cmha compress --layers` takes
  std::string alias;          // another name --layers takes ("vit"); "" = none
  std::string model_kind;     // the model.kind that has it: "transformer" or "vit"
  std::string role;           // "encoder self-attention"; "" = the model's one attention
  std::string inherits;       // the place whose keys it falls back to; "" = none
  std::string layers;         // the model key counting its layers: model.<layers>
  std::string weight_prefix;  // its layers' weight names, '#' the layer index: "encoder.layers.#.self_attn."
};
// model.attention first: the ViT's attention, and the keys the transformer's places inherit.
const std::vector<AttentionPlace>& attention_places();
// The places of one model.kind, in model order.
std::vector<AttentionPlace> attention_places(const std::string& model_kind);

}  // namespace cmha::nn
