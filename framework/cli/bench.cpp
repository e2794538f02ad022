// cmha bench RECIPE: full training steps on random tokens, one JSON line.
#include <cstdio>

#include "cli/command_line.h"
#include "distributed/launch.h"
#include "run/device.h"
#include "tensor/error.h"
#include "train/bench.h"

namespace cmha::cli {

namespace {
const char* kBenchDescription =
    "Times full training steps of the recipe's model on random data (forward,\n"
    "label-smoothed cross-entropy, backward, the optim.* optimiser) on\n"
    "train.device (or --device): the transformer with batches of\n"
    "bench.batch_size sentences of bench.src_len source and bench.tgt_len target\n"
    "tokens, the vision transformer with bench.batch_size images. It prints one\n"
    "JSON line: tokens_per_s or images_per_s at the median step, step_ms_median,\n"
    "gemm_tflop_per_step (the GEMMs' work, for MFU) and attention_paths among\n"
    "others; before it, on stderr, which path each attention place took (cuDNN's\n"
    "fused attention or cmha's unfused one) and why.\n"
    "\n"
    "Under 'mpirun -np N' every rank times the same batch size and exchanges\n"
    "gradients as 'cmha train' does; rank 0 prints tokens_per_s of all ranks\n"
    "together and exchange_ms_median, the exchange the backward pass did not hide.\n";
}  // namespace

int bench_command(const Args& args) {
  std::vector<std::string> positionals;
  long long steps = 10, warmup = 2, threads = -1;
  CommandLine cl("bench", kBenchDescription);
  cl.app().add_option("recipe", positionals, "the recipe file, and key.path=value overrides of its keys")
      ->type_name("RECIPE [key.path=value ...]");
  cl.app().add_option("--steps", steps, "timed steps")->check(whole_number(1, 1000000))->type_name("N")->capture_default_str();
  cl.app().add_option("--warmup", warmup, "untimed steps first")
      ->check(whole_number(0, 1000000))->type_name("N")->capture_default_str();
  cl.app().add_option("--threads", threads, "CPU threads (default: train.threads; 0 = all cores)")
      ->check(whole_number(0, 4096))->type_name("T");
  std::string device;
  cl.app().add_option("--device", device, "where to run: cpu, cuda, cuda:N (default: the recipe's train.device)")
      ->type_name("DEVICE");
  bool profile = false;
  cl.app().add_flag("--profile", profile,
                    "also time every kernel of the timed steps and print a table to stderr: time per kernel and "
                    "phase (forward, backward, exchange, optimizer), share of the step, GFLOP/s of the GEMMs");
  if (!cl.parse(args)) return 0;
  const FileAndOverrides given = split_overrides(positionals, "bench", "recipe");
  const std::string& recipe_path = given.file;
  std::vector<std::string> overrides = given.overrides;
  if (!device.empty()) overrides.push_back("train.device=" + device);
  if (recipe_path.empty()) throw Error("cmha bench needs a recipe file (try 'cmha bench --help')");
  const run::Recipe recipe = run::Recipe::load(recipe_path, overrides);
  const int t = threads >= 0 ? static_cast<int>(threads) : static_cast<int>(recipe.integer("train.threads"));
  run::recipe_device(recipe);
  const auto comm = distributed::make_communicator(recipe.string("train.dist_backend"), distributed::launch_from_environment(),
                              run::recipe_device(recipe), recipe.real("train.dist_timeout_s"));
  return distributed::run_or_abort(*comm, [&] {
    const train::BenchResult r =
        train::run_training_benchmark(recipe, static_cast<int>(steps), static_cast<int>(warmup), t, *comm, profile);
    if (comm->is_main()) std::fprintf(stderr, "%s", r.attention_paths_report.c_str());
    if (comm->is_main() && profile) std::fprintf(stderr, "kernel profile, per step:\n%s", r.profile.c_str());
    if (comm->is_main() && r.host_syncs_per_step >= 0)
      std::fprintf(stderr, "host waits for the (emulated) GPU per timed step: at most %lld before the loss is read; "
                   "by cause, the read included: %s\n",
                   static_cast<long long>(r.host_syncs_per_step),
                   r.host_sync_causes.empty() ? "none" : r.host_sync_causes.c_str());
    if (comm->is_main()) std::printf("%s\n", r.json(recipe_path).c_str());
    return 0;
  });
}

}  // namespace cmha::cli
