#pragma once
// Head telemetry during training (train.head_telemetry; the trainer calls it
// through TrainerHooks::validation_row): at each validation,
// for every attention layer, the statistic of the paper's Figure 1 — how many
// principal directions hold 90 % and 99 % of the energy of the stacked per-head
// products W_Q^(i) W_K^(i)ᵀ (concat, talking heads), or of the shared W̃_Q and
// W̃_K (collaborative) — and for collaborative layers the norms of the mixing
// matrix's columns (one per shared dimension, over the heads) and its
// effective rank (Roy & Vetterli 2007: exp of the entropy of its normalized
// singular values). One metrics row of split "heads"; `cmha plot RUN --heads`
// draws how they evolve.
#include <nlohmann/json.hpp>

#include "nn/module.h"

namespace cmha::compress {

// The row's fields, "<place>.<layer>/<stat>" ("encoder.0/qk90",
// "encoder.0/q99", "encoder.0/mixing_erank", "encoder.0/mixing_norms" (a
// list), ...), or an empty object when `model` is neither a transformer nor a
// vision transformer. Reads the weights (copied to the CPU); grouped layers
// are left out (their query and key heads differ in number).
nlohmann::json head_telemetry(nn::Module& model);

}  // namespace cmha::compress
