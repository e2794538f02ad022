#pragma once
// From a recipe to the models' and the optimiser's configurations.
#include "nn/transformer.h"
#include "optim/adam.h"
#include "nn/vit.h"
#include "train/recipe.h"

namespace cmha::train {

// The attention keys under `prefix` ("model.encoder_attention", ...), each
// falling back to model.attention when unset.
nn::AttentionConfig attention_config(const Recipe& r, const std::string& prefix);
nn::TransformerConfig transformer_config(const Recipe& r);
nn::VitConfig vit_config(const Recipe& r);
// optim.lr, optim.betas, optim.eps, optim.weight_decay; AdamW when optim.name is adamw.
optim::AdamOptions adam_options(const Recipe& r);

}  // namespace cmha::train
