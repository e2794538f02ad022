#pragma once
// The recipe written beside a checkpoint that cmha made rather than trained
// (cmha compress, cmha import): its own recipe with train.init_from set to
// the checkpoint, so that `cmha train OUT.yaml` fine-tunes it.
#include <string>

namespace cmha::run {

// OUT.safetensors → OUT.yaml (any other name gets .yaml appended).
std::string finetune_recipe_path(const std::string& checkpoint);

// Writes finetune_recipe_path(checkpoint): `recipe_yaml` with train.init_from =
// checkpoint and train.save_dir = OUT_finetune. Returns the path written.
std::string write_finetune_recipe(const std::string& checkpoint, const std::string& recipe_yaml);

}  // namespace cmha::run
