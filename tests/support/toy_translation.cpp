#include "support/toy_translation.h"

#include "support/check.h"
#include "support/files.h"

namespace cmha::test {

void write_toy_corpus(const std::string& prefix, int lines, uint32_t seed) {
  static const char* en[] = {"the", "a", "cat", "dog", "house", "red", "big", "small", "see", "have", "like",
                             "green", "tree", "car", "man", "woman", "and", "with", "old", "new"};
  static const char* de[] = {"der", "ein", "katze", "hund", "haus", "rot", "gross", "klein", "seh", "hab", "mag",
                             "gruen", "baum", "auto", "mann", "frau", "und", "mit", "alt", "neu"};
  static const char* en_end[] = {"", "s", "ed", "ing"};
  static const char* de_end[] = {"", "en", "te", "end"};
  uint32_t state = seed * 2654435761u + 1;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return state >> 8;
  };
  std::string s, t;
  for (int i = 0; i < lines; ++i) {
    const int n = 2 + static_cast<int>(next() % 8);
    for (int k = 0; k < n; ++k) {
      const int w = static_cast<int>(next() % 20), e = static_cast<int>(next() % 4);
      s += (k ? " " : "") + std::string(en[w]) + en_end[e];
      t += (k ? " " : "") + std::string(de[w]) + de_end[e];
    }
    s += '\n';
    t += '\n';
  }
  write_file(prefix + ".en", s);
  write_file(prefix + ".de", t);
}

std::string toy_dir(const std::string& tag) {
  const std::string dir = test::temp_dir("mt_" + tag);
  write_toy_corpus(dir + "/train", 400, 1);
  write_toy_corpus(dir + "/valid", 40, 2);
  return dir;
}

run::Recipe toy_recipe(const std::string& dir, const std::vector<std::string>& overrides) {
  return run::Recipe::parse(
      "model: {kind: transformer, d_model: 32, ffn_dim: 64, encoder_layers: 1, decoder_layers: 1, vocab_size: 100,\n"
      "        dropout: 0.0, attention: {heads: 2}}\n"
      "optim: {name: adam, lr: 0.005, betas: [0.9, 0.98], eps: 1e-9}\n"
      "lr: {schedule: inverse_sqrt, warmup: 10}\n"
      "train: {task: translation, save_dir: " + dir + "/run, max_updates: 40, max_epochs: 0, log_every: 1000,\n"
      "        label_smoothing: 0.1, seed: 3}\n"
      "data: {train_prefix: " + dir + "/train, valid_prefix: " + dir + "/valid, max_tokens: 300, max_len: 40}\n",
      "<toy recipe>", overrides);
}

}  // namespace cmha::test
