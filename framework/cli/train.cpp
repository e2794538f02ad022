// cmha train [RECIPE] [--resume | --overwrite] [--dump-config] [key.path=value ...]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include "cli/commands.h"
#include "dist/launch.h"
#include "tensor/error.h"
#include "train/device.h"
#include "train/image_task.h"
#include "train/options.h"
#include "train/progress.h"
#include "train/run_dir.h"
#include "train/run_results.h"
#include "train/trainer.h"
#include "train/translation_task.h"

namespace cmha::cli {
namespace {

const char* kTrainUsage =
    "usage: cmha train [RECIPE] [--resume | --overwrite] [--dump-config] [--threads T] [key.path=value ...]\n"
    "\n"
    "Trains the model a YAML recipe describes; without one, the built-in recipe\n"
    "recipes/local/en_de_transformer_small.yaml (a small collaborative-attention\n"
    "transformer on the local English-German corpus of data/prepare_local_en_de.sh,\n"
    "then averaged, beam-searched and BLEU-scored on its test split).\n"
    "key.path=value overrides any recipe key.\n"
    "\n"
    "Data parallel: 'mpirun -np N cmha train RECIPE' (or srun under Slurm) trains\n"
    "on N processes, each on 1/N of every batch; see train.dist_* below.\n"
    "\n"
    "The run directory (train.save_dir) belongs to one run: a fresh start into a\n"
    "directory that holds a run (checkpoints, metrics.jsonl, results.json) is\n"
    "refused, and so is a second process on a directory in use (DIR/.lock).\n"
    "Temporaries of saves killed mid-write (*.tmp.PID of a dead PID) are removed.\n"
    "\n"
    "options:\n"
    "  --resume        continue from the latest checkpoint in train.save_dir (afresh\n"
    "                  when it has none); without RECIPE, with the directory's own\n"
    "                  recipe (DIR/recipe.yaml) and the overrides given\n"
    "  --overwrite     start afresh in a directory that holds a run: DELETES that\n"
    "                  run's checkpoints, metrics.jsonl, results.json, recipe.yaml,\n"
    "                  spm.model, cache/ and test.*.hyp first (other files stay)\n"
    "  --dump-config   print the resolved recipe (every key) and exit\n"
    "  --threads T     CPU threads (overrides train.threads)\n"
    "  -h, --help      this help and every recipe key\n";

void print_keys() {
  std::printf("\nrecipe keys (type, default: help):\n");
  for (const auto& spec : train::option_registry()) {
    const std::string def = spec.default_value.empty() ? "inherits " + spec.inherit_from : spec.default_value;
    std::printf("  %-36s %s, %s: %s\n", spec.path.c_str(), train::option_type_name(spec.type), def.c_str(),
                spec.help.c_str());
  }
}

int train_with(const train::Recipe& recipe, const std::string& recipe_path, train::RunStart start, long long threads,
               dist::Communicator& comm);

}  // namespace

int train_command(const Args& args) {
  std::string recipe_path;
  std::vector<std::string> overrides;
  bool resume = false, overwrite = false, dump = false;
  long long threads = -1;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kTrainUsage, stdout);
      print_keys();
      return 0;
    } else if (a == "--resume") {
      resume = true;
    } else if (a == "--overwrite") {
      overwrite = true;
    } else if (a == "--dump-config") {
      dump = true;
    } else if (a == "--threads") {
      threads = parse_int(option_value(args, i, "train"), a, 1, 4096);
    } else if (!a.empty() && a[0] == '-') {
      throw Error("unknown option '" + a + "' for 'cmha train' (try 'cmha train --help')");
    } else if (a.find('=') != std::string::npos) {
      overrides.push_back(a);
    } else if (recipe_path.empty()) {
      recipe_path = a;
    } else {
      throw Error("cmha train takes one recipe, got '" + recipe_path + "' and '" + a + "'");
    }
  }
  CMHA_CHECK(!(resume && overwrite), "--resume continues the run in train.save_dir and --overwrite "
                                     "deletes it: give one of them");
  train::Recipe recipe = recipe_path.empty()
                             ? train::Recipe::parse(default_recipe_text(), default_recipe_name(), overrides)
                             : train::Recipe::load(recipe_path, overrides);
  if (resume && recipe_path.empty()) {
    // Continue the run's own recipe, not the built-in one it may never have used.
    const std::string stored = (std::filesystem::path(recipe.string("train.save_dir")) / "recipe.yaml").string();
    if (std::filesystem::is_regular_file(stored)) {
      recipe_path = stored;
      recipe = train::Recipe::load(recipe_path, overrides);
    } else {
      // Only the built-in recipe's own run may resume without a recipe file.
      const std::string own = train::Recipe::parse(default_recipe_text(), default_recipe_name(), {}).string("train.save_dir");
      CMHA_CHECK(recipe.string("train.save_dir") == own,
                 "--resume without a recipe continues the run in train.save_dir '" + recipe.string("train.save_dir") +
                     "', but it holds no run (no " + stored + "): give the recipe too");
    }
  }
  const train::RunStart start = resume ? train::RunStart::resume
                                       : (overwrite ? train::RunStart::overwrite : train::RunStart::fresh);
  if (dump) {
    std::fputs(recipe.dump().c_str(), stdout);
    return 0;
  }
  // Before the task: its data preparation already waits on rank 0, and a failure there must end the job.
  const std::unique_ptr<dist::Communicator> comm_owner =
      dist::make_communicator(recipe.string("train.dist_backend"), dist::launch_from_environment());
  dist::Communicator& comm = *comm_owner;
  return dist::run_or_abort(comm, [&] { return train_with(recipe, recipe_path, start, threads, comm); });
}

namespace {

int train_with(const train::Recipe& recipe, const std::string& recipe_path, train::RunStart start, long long threads,
               dist::Communicator& comm) {
  // Rank 0 alone writes the run directory; it holds it until the process ends (the final evaluation included).
  std::optional<train::RunDirLock> run_dir;
  train::check_save_dir(recipe.string("train.save_dir"));  // every rank: a file where the run directory or a folder above it belongs
  if (comm.is_main()) run_dir.emplace(train::claim_run_directory(recipe.string("train.save_dir"), start));
  long long t = threads > 0 ? threads : recipe.integer("train.threads");
  // "All cores" shared by the ranks on this machine, within the cores this rank is bound to
  // (OpenMP's default count follows the binding; mpirun binds 2 ranks to a core each).
  if (t == 0 && comm.local_size() > 1 && !std::getenv("OMP_NUM_THREADS"))
    t = std::max<long long>(1, std::min<long long>(omp_get_max_threads(), std::thread::hardware_concurrency() /
                                                                              comm.local_size()));
  if (t > 0) omp_set_num_threads(static_cast<int>(t));
  train::recipe_device(recipe);  // an unusable device fails here, before any data preparation

  Generator init_gen(static_cast<uint64_t>(recipe.integer("train.seed")));
  std::unique_ptr<train::Task> task;
  const std::string kind = recipe.string("train.task");
  if (kind == "image_classification") {
    CMHA_CHECK(recipe.string("model.kind") == "vit",
               "train.task image_classification needs model.kind vit, got '" + recipe.string("model.kind") + "'");
    task = std::make_unique<train::ImageClassificationTask>(recipe, init_gen, comm.rank(), comm.size());
  } else {
    CMHA_CHECK(recipe.string("model.kind") == "transformer",
               "train.task translation needs model.kind transformer, got '" + recipe.string("model.kind") + "'");
    task = std::make_unique<train::TranslationTask>(recipe, init_gen, comm.rank(), comm.size());
  }
  if (comm.is_main()) {
    // Wrapped at its fields on a terminal, like the trainer's lines (train/progress.h).
    const std::vector<std::string> fields = {
        "cmha train: " + (recipe_path.empty() ? std::string(default_recipe_name()) : recipe_path),
        recipe.string("model.kind") + ", " + std::to_string(task->model().num_parameters()) + " parameters, attention " +
            recipe.string("model.attention.type"),
        std::to_string(comm.size()) + " ranks × " + std::to_string(omp_get_max_threads()) + " threads",
        "run dir " + recipe.string("train.save_dir")};
    const size_t width = train::stderr_is_interactive() ? static_cast<size_t>(train::terminal_width() - 1) : 0;
    for (const std::string& line : train::wrap_fields(fields, width)) std::fprintf(stderr, "%s\n", line.c_str());
  }
  train::TrainerHooks hooks;
  hooks.resume = start == train::RunStart::resume;
  hooks.stop_requested = [] { return interrupted(); };
  train::Trainer trainer(recipe, *task, comm, hooks);
  const train::TrainSummary s = trainer.run();  // it prints the closing summary line
  if (s.interrupted) throw Interrupted{};
  if (comm.is_main()) {
    const nlohmann::json results = task->final_evaluation(recipe.string("train.save_dir"));
    if (!results.empty()) {
      train::write_run_results(recipe.string("train.save_dir"), results);
      std::fprintf(stderr, "cmha train: results %s → %s\n", results.dump().c_str(),
                   train::run_results_path(recipe.string("train.save_dir")).c_str());
    }
  }
  return 0;
}

}  // namespace

}  // namespace cmha::cli
