// cmha bench RECIPE: full training steps on random tokens, one JSON line.
#include <cstdio>

#include "cli/commands.h"
#include "dist/launch.h"
#include "tensor/error.h"
#include "train/bench.h"
#include "train/device.h"

namespace cmha::cli {

namespace {
const char* kBenchUsage =
    "usage: cmha bench RECIPE [--steps N] [--warmup N] [--threads T] [key.path=value ...]\n"
    "\n"
    "Times full training steps of the recipe's transformer on random tokens\n"
    "(forward, label-smoothed cross-entropy, backward, the optim.* optimiser) with\n"
    "batches of bench.batch_size sentences of bench.src_len source and\n"
    "bench.tgt_len target tokens, and prints one JSON line: tokens_per_s (target\n"
    "tokens per second at the median step) and step_ms_median among others.\n"
    "\n"
    "Under 'mpirun -np N' every rank times the same batch size and exchanges\n"
    "gradients as 'cmha train' does; rank 0 prints tokens_per_s of all ranks\n"
    "together and exchange_ms_median, the exchange the backward pass did not hide.\n"
    "\n"
    "options:\n"
    "  --steps N     timed steps (default 10)\n"
    "  --warmup N    untimed steps first (default 2)\n"
    "  --threads T   CPU threads (default: train.threads, 0 = all cores)\n";
}  // namespace

int bench_command(const Args& args) {
  std::string recipe_path;
  std::vector<std::string> overrides;
  long long steps = 10, warmup = 2, threads = -1;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kBenchUsage, stdout);
      return 0;
    }
    if (a == "--steps") steps = parse_int(option_value(args, i, "bench"), a, 1, 1000000);
    else if (a == "--warmup") warmup = parse_int(option_value(args, i, "bench"), a, 0, 1000000);
    else if (a == "--threads") threads = parse_int(option_value(args, i, "bench"), a, 0, 4096);
    else if (a.find('=') != std::string::npos) overrides.push_back(a);
    else if (a.rfind("-", 0) == 0) throw Error("unknown option '" + a + "' of 'cmha bench' (try 'cmha bench --help')");
    else if (recipe_path.empty()) recipe_path = a;
    else throw Error("cmha bench takes one recipe, got '" + recipe_path + "' and '" + a + "'");
  }
  if (recipe_path.empty()) throw Error("cmha bench needs a recipe file (try 'cmha bench --help')");
  const train::Recipe recipe = train::Recipe::load(recipe_path, overrides);
  const int t = threads >= 0 ? static_cast<int>(threads) : static_cast<int>(recipe.integer("train.threads"));
  train::recipe_device(recipe);
  const auto comm = dist::make_communicator(recipe.string("train.dist_backend"), dist::launch_from_environment());
  return dist::run_or_abort(*comm, [&] {
    const train::BenchResult r =
        train::run_training_benchmark(recipe, static_cast<int>(steps), static_cast<int>(warmup), t, *comm);
    if (comm->is_main()) std::printf("%s\n", r.json(recipe_path).c_str());
    return 0;
  });
}

}  // namespace cmha::cli
