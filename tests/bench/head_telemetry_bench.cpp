// The cost of the head telemetry (train.head_telemetry, compress/head_telemetry.h)
// against the training step of the same recipe, interleaved in one process:
// each round times S training steps (train::run_training_benchmark, what
// `cmha bench` runs: the recipe's model, optimiser and bf16 setting on
// bench.batch_size × bench.src_len/tgt_len random tokens) and then S telemetry
// rows of that model, and takes the ratio of their medians. The telemetry's
// work depends only on the weights' shapes, so the rows of a fresh model cost
// what a trained one's do. With train.head_telemetry_every N the telemetry
// costs ratio / N of the training time; at validations only, ratio /
// train.validate_every.
//
// Run: build/tests/bench/head_telemetry_bench [RECIPE] [--rounds R] [--steps S] [--threads T] [key=value ...]
// (RECIPE defaults to recipes/local/en_de_transformer_small.yaml).
#include "bench_main.h"
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "compress/head_telemetry.h"
#include "distributed/communicator.h"
#include "run/device.h"
#include "run/recipe.h"
#include "tensor/error.h"
#include "train/bench.h"
#include "train/task_factory.h"

using namespace cmha;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) try {
  bench::ensure_wait_policy(argv);  // passive unless set (bench_main.h: a loaded 2-core machine)
  std::string recipe_path = std::string(CMHA_SOURCE_DIR) + "/recipes/local/en_de_transformer_small.yaml";
  int rounds = 5, steps = 5, threads = 0;
  std::vector<std::string> overrides;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] {
      CMHA_CHECK(i + 1 < argc, a + " needs a value");
      return std::atoi(argv[++i]);
    };
    if (a == "--rounds") rounds = next();
    else if (a == "--steps") steps = next();
    else if (a == "--threads") threads = next();
    else if (a.find('=') != std::string::npos) overrides.push_back(a);
    else recipe_path = a;
  }
  CMHA_CHECK(rounds >= 1 && steps >= 1, "--rounds and --steps need 1 or more");
  const run::Recipe recipe = run::Recipe::load(recipe_path, overrides);
  if (threads > 0) omp_set_num_threads(threads);
  distributed::SingleCommunicator comm;
  // The telemetry's model: the recipe's, as the benchmark builds it.
  Generator init_gen(1), data_gen(2);
  train::BenchModel model = train::model_kind(recipe.string("model.kind"))
                                .make_bench(recipe, init_gen, data_gen, run::recipe_device(recipe));
  std::printf("recipe %s: %lld parameters, attention %s, %d threads, OMP_WAIT_POLICY=%s\n", recipe_path.c_str(),
              static_cast<long long>(model.module->num_parameters()), model.attention.c_str(), omp_get_max_threads(),
              std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "(unset)");
  std::printf("%5s %12s %15s %8s\n", "round", "step ms", "telemetry ms", "ratio");
  std::vector<double> ratios, step_ms, telemetry_ms;
  for (int r = 0; r < rounds; ++r) {
    const train::BenchResult b = train::run_training_benchmark(recipe, steps, r == 0 ? 2 : 1, threads, comm);
    std::vector<double> t;
    for (int s = 0; s < steps; ++s) {
      const auto t0 = std::chrono::steady_clock::now();
      const nlohmann::json row = compress::head_telemetry(*model.module);
      t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      CMHA_CHECK(!row.empty(), "the recipe's model has no attention layers for the telemetry");
    }
    step_ms.push_back(b.step_ms_median);
    telemetry_ms.push_back(median(t));
    ratios.push_back(telemetry_ms.back() / step_ms.back());
    std::printf("%5d %12.1f %15.2f %8.4f\n", r + 1, step_ms.back(), telemetry_ms.back(), ratios.back());
  }
  const double ratio = median(ratios);
  std::printf("median over %d rounds: step %.1f ms, telemetry %.2f ms, telemetry / step = %.4f\n", rounds,
              median(step_ms), median(telemetry_ms), ratio);
  std::printf("train.head_telemetry_every N costs %.2f %% / N of the training time: at most 2 %% from N = %d; "
              "at validations only (train.validate_every %lld) %.4f %%\n",
              100.0 * ratio, static_cast<int>(std::ceil(ratio / 0.02)),
              static_cast<long long>(recipe.integer("train.validate_every")),
              recipe.integer("train.validate_every") > 0 ? 100.0 * ratio / recipe.integer("train.validate_every")
                                                         : NAN);
  return 0;
} catch (const cmha::Error& e) {
  std::fprintf(stderr, "head_telemetry_bench: %s\n", e.what());
  return 2;
}
