#include "train/finetune_recipe.h"

#include <cstdio>

#include "tensor/error.h"
#include "train/recipe.h"

namespace cmha::train {

std::string finetune_recipe_path(const std::string& checkpoint) {
  const std::string ext = ".safetensors";
  if (checkpoint.size() > ext.size() && checkpoint.compare(checkpoint.size() - ext.size(), ext.size(), ext) == 0)
    return checkpoint.substr(0, checkpoint.size() - ext.size()) + ".yaml";
  return checkpoint + ".yaml";
}

std::string write_finetune_recipe(const std::string& checkpoint, const std::string& recipe_yaml) {
  const std::string path = finetune_recipe_path(checkpoint);
  const std::string stem = path.substr(0, path.size() - 5);
  const Recipe finetune = Recipe::parse_stored(recipe_yaml, checkpoint + " (recipe)",
                                               {"train.init_from=" + checkpoint, "train.save_dir=" + stem + "_finetune"});
  std::FILE* f = std::fopen(path.c_str(), "w");
  CMHA_CHECK(f, "cannot write the fine-tuning recipe '" + path + "'");
  const std::string text = finetune.dump();
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  CMHA_CHECK(std::fclose(f) == 0 && ok, "cannot write the fine-tuning recipe '" + path + "'");
  return path;
}

}  // namespace cmha::train
