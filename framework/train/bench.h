#pragma once
// Full training steps on random tokens (forward, label-smoothed
// cross-entropy, backward, Adam) timed one by one: `cmha bench`.
#include <string>
#include <vector>

#include "train/recipe.h"

namespace cmha::train {

struct BenchResult {
  std::string attention;        // encoder self-attention type
  int64_t parameters = 0;
  int threads = 0;
  int64_t target_tokens = 0;    // per step (labels)
  std::vector<double> step_ms;  // every timed step
  double step_ms_median = 0;
  double tokens_per_s = 0;      // target tokens / median step time
  float first_loss = 0, last_loss = 0;
  std::string json(const std::string& recipe_name) const;
};

// Runs `warmup` untimed then `steps` timed steps of the recipe's transformer
// with bench.batch_size × bench.src_len source and × bench.tgt_len target tokens.
BenchResult run_training_benchmark(const Recipe& recipe, int steps, int warmup, int threads);

}  // namespace cmha::train
