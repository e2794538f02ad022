#include "run/finetune_recipe.h"

#include <cstdio>

#include "run/recipe.h"
#include "tensor/error.h"
#include "tensor/atomic_file.h"

namespace cmha::run {

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
  write_file_atomically(path, finetune.dump());
  return path;
}

}  // namespace cmha::run
