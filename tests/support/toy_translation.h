#pragma once
// A toy English→German corpus and a tiny transformer recipe over it, for the
// tests of the translation task, its evaluation and the commands.
#include <cstdint>
#include <string>
#include <vector>

#include "run/recipe.h"

namespace cmha::test {

// German word forms mapped one to one from English ones (20 stems × 4 endings
// each side), 2–9 words a line: <prefix>.en and <prefix>.de.
void write_toy_corpus(const std::string& prefix, int lines, uint32_t seed);
// A fresh temporary folder with train.{en,de} (400 lines) and valid.{en,de} (40).
std::string toy_dir(const std::string& tag);
// A 1+1-layer transformer (d_model 32) trained 40 updates on toy_dir's corpus,
// run directory <dir>/run; `overrides` as key.path=value.
run::Recipe toy_recipe(const std::string& dir, const std::vector<std::string>& overrides = {});

}  // namespace cmha::test
