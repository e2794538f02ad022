#pragma once
// From a recipe to the models' and the optimiser's configurations.
#include "nn/transformer.h"
#include <memory>

#include "nn/vit.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "run/recipe.h"

namespace cmha::run {

// The attention keys (nn/attention/registry.h) under `prefix`
// ("model.encoder_attention", ...), each falling back to model.attention when unset.
nn::AttentionConfig attention_config(const Recipe& r, const std::string& prefix);
// The layers model.<place>.layers sets apart (`prefix` = "model.<place>"),
// each attention_config(r, prefix) with that layer's keys on top.
nn::LayerAttention layer_attention_configs(const Recipe& r, const std::string& prefix);
// One layer's attention: its own settings, else the place's.
nn::AttentionConfig attention_config(const Recipe& r, const std::string& prefix, int64_t layer);
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
// The recipe's lr.* keys as a schedule; the cosine's length defaults to the
// whole run (train.max_updates, or max_epochs × updates_per_epoch).
std::unique_ptr<optim::LrSchedule> make_schedule(const Recipe& r, int64_t updates_per_epoch, int world);
// The schedule's checks (a warmup longer than the cosine, a bad lr_min, ...)
// where they do not need the epoch's length, so that `cmha train` reports
// them before preparing any data (a SentencePiece model takes seconds to
// minutes); the rest are checked when the trainer builds the schedule.
void check_schedule_before_data(const Recipe& r, int world);

// Whether a checkpoint's stored recipe (read from `path`) and this one agree
// on every key that defines the architecture: a resumed or fine-tuned run
// must. Dropout rates and initialisation-only keys may differ.
bool same_architecture(const std::string& stored_recipe, const std::string& path, const Recipe& r);

}  // namespace cmha::run
