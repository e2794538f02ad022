#pragma once
// From a recipe to the models' configurations.
#include "nn/transformer.h"
#include "nn/vit.h"
#include "train/recipe.h"

namespace cmha::train {

// The attention keys under `prefix` ("model.encoder_attention", ...), each
// falling back to model.attention when unset.
nn::AttentionConfig attention_config(const Recipe& r, const std::string& prefix);
nn::TransformerConfig transformer_config(const Recipe& r);
nn::VitConfig vit_config(const Recipe& r);

}  // namespace cmha::train
