#pragma once
// From a recipe to the models' and the optimiser's configurations.
#include "nn/transformer.h"
#include "optim/optimizer.h"
#include "nn/vit.h"
#include "train/recipe.h"

namespace cmha::train {

// The attention keys (nn/attention/registry.h) under `prefix`
// ("model.encoder_attention", ...), each falling back to model.attention when unset.
nn::AttentionConfig attention_config(const Recipe& r, const std::string& prefix);
nn::TransformerConfig transformer_config(const Recipe& r);
nn::VitConfig vit_config(const Recipe& r);
// The optim.* keys of the optimiser (optim.name, lr, betas, eps, momentum,
// nesterov, weight_decay), for optim::make_optimizer.
optim::OptimizerOptions optimizer_options(const Recipe& r);
// The peak learning rate: optim.lr, times global batch / optim.lr_scale_batch
// when that is set (global batch = data.batch_size × train.update_freq × world).
double peak_lr(const Recipe& r, int world);
// The warmup length the schedule counts in: lr.warmup_epochs in epochs when
// lr.per_epoch, else in updates (rounded); lr.warmup when lr.warmup_epochs is 0.
int64_t warmup_length(const Recipe& r, int64_t updates_per_epoch);

}  // namespace cmha::train
