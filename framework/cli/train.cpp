// cmha train [RECIPE] [--resume | --overwrite] [--dump-config] [--threads T] [key.path=value ...]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include "cli/command_line.h"
#include "dist/launch.h"
#include "tensor/error.h"
#include "train/device.h"
#include "train/model_config.h"
#include "train/image_task.h"
#include "train/options.h"
#include "train/progress.h"
#include "train/run_dir.h"
#include "train/run_results.h"
#include "train/trainer.h"
#include "train/translation_task.h"

namespace cmha::cli {
namespace {

const char* kTrainDescription =
    "Trains the model a YAML recipe describes; without one, the built-in recipe\n"
    "recipes/local/en_de_transformer_small.yaml (a small collaborative-attention\n"
    "transformer on the local English-German corpus of data/prepare_local_en_de.sh,\n"
    "then averaged, beam-searched and BLEU-scored on its test split).\n"
    "key.path=value overrides any recipe key; 'cmha train RECIPE --help' shows the\n"
    "keys RECIPE's model and task read, with their resolved values.\n"
    "\n"
    "Data parallel: 'mpirun -np N cmha train RECIPE' (or srun under Slurm) trains\n"
    "on N processes, each on 1/N of every batch; see train.dist_* below.\n"
    "\n"
    "The run directory (train.save_dir) belongs to one run: a fresh start into a\n"
    "directory that holds a run (checkpoints, metrics.jsonl, results.json) is\n"
    "refused, and so is a second process on a directory in use (DIR/.lock).\n"
    "Temporaries of saves killed mid-write (*.tmp.PID of a dead PID) are removed.\n";

// "a string, relu" and the choices: what a key takes, for --help.
std::string key_values(const train::OptionSpec& spec) {
  std::string out = train::option_type_name(spec.type);
  if (!spec.choices.empty()) {
    out = "one of";
    for (size_t i = 0; i < spec.choices.size(); ++i) out += (i == 0 ? " " : "|") + spec.choices[i];
  }
  return out;
}

// Every key of the registry: what it takes, its default, whom it is for, its help.
void print_keys() {
  std::printf("\nrecipe keys (values, default: help [the models and tasks that read it, when not all]):\n");
  for (const auto& spec : train::option_registry()) {
    const std::string def = spec.default_value.empty() ? "inherits " + spec.inherit_from : spec.default_value;
    const std::string who = train::option_applies_to(spec);
    std::printf("  %-36s %s, %s: %s%s\n", spec.path.c_str(), key_values(spec).c_str(), def.c_str(), spec.help.c_str(),
                who.empty() ? "" : (" [" + who + "]").c_str());
  }
}

// The keys `recipe` reads, with their resolved values and where each was set.
void print_resolved_keys(const train::Recipe& recipe, const std::string& name) {
  std::printf("\nrecipe keys of %s (model.kind %s, train.task %s), resolved (value  help  [where set]):\n", name.c_str(),
              recipe.string("model.kind").c_str(), recipe.string("train.task").c_str());
  for (const auto& spec : train::option_registry()) {
    if (!recipe.reads(spec.path)) continue;
    const std::string where = recipe.origin(spec.path);
    std::printf("  %-36s %-14s %s%s\n", spec.path.c_str(), recipe.text(spec.path).c_str(), spec.help.c_str(),
                where == "default" ? "" : ("  [" + where + "]").c_str());
  }
}

int train_with(const train::Recipe& recipe, const std::string& recipe_path, train::RunStart start, long long threads,
               dist::Communicator& comm);

}  // namespace

int train_command(const Args& args) {
  std::vector<std::string> positionals;
  bool resume = false, overwrite = false, dump = false;
  long long threads = -1;
  CommandLine cl("train", kTrainDescription);
  cl.app().add_option("recipe", positionals, "the recipe file, and key.path=value overrides of its keys")
      ->type_name("[RECIPE] [key.path=value ...]");
  cl.app().add_flag("--resume", resume,
                    "continue from the latest checkpoint in train.save_dir (afresh when it has none); without "
                    "RECIPE, with the directory's own recipe (DIR/recipe.yaml) and the overrides given");
  cl.app().add_flag("--overwrite", overwrite,
                    "start afresh in a directory that holds a run: DELETES that run's checkpoints, metrics.jsonl, "
                    "results.json, recipe.yaml, spm.model, cache/ and test.*.hyp first (other files stay)");
  cl.app().add_flag("--dump-config", dump, "print the resolved recipe (the keys its model and task read) and exit");
  cl.app().add_option("--threads", threads, "CPU threads (overrides train.threads)")
      ->check(whole_number(1, 4096))->type_name("T");
  const bool run = cl.parse(args);
  const FileAndOverrides given = split_overrides(positionals, "train", "recipe");
  std::string recipe_path = given.file;
  const std::vector<std::string>& overrides = given.overrides;
  if (!run) {
    if (recipe_path.empty()) print_keys();
    else print_resolved_keys(train::Recipe::load(recipe_path, overrides), recipe_path);
    return 0;
  }
  CMHA_CHECK(!(resume && overwrite), "--resume continues the run in train.save_dir and --overwrite "
                                     "deletes it: give one of them");
  std::optional<train::Recipe> loaded;
  if (resume && recipe_path.empty()) {
    // Continue the run's own recipe, not the built-in one it may never have used (whose keys the overrides may not fit).
    std::vector<std::string> dir_override;
    for (const std::string& o : overrides)
      if (o.rfind("train.save_dir=", 0) == 0) dir_override.push_back(o);
    const std::string dir =
        train::Recipe::parse(default_recipe_text(), default_recipe_name(), dir_override).string("train.save_dir");
    const std::string stored = (std::filesystem::path(dir) / "recipe.yaml").string();
    if (std::filesystem::is_regular_file(stored)) {
      recipe_path = stored;
      loaded = train::Recipe::load_stored(recipe_path, overrides);
    } else {
      // Only the built-in recipe's own run may resume without a recipe file.
      const std::string own = train::Recipe::parse(default_recipe_text(), default_recipe_name(), {}).string("train.save_dir");
      CMHA_CHECK(dir == own, "--resume without a recipe continues the run in train.save_dir '" + dir +
                                 "', but it holds no run (no " + stored + "): give the recipe too");
    }
  }
  if (!loaded)
    loaded = recipe_path.empty() ? train::Recipe::parse(default_recipe_text(), default_recipe_name(), overrides)
                                 : train::Recipe::load(recipe_path, overrides);
  const train::Recipe& recipe = *loaded;
  const train::RunStart start = resume ? train::RunStart::resume
                                       : (overwrite ? train::RunStart::overwrite : train::RunStart::fresh);
  if (dump) {
    std::fputs(recipe.dump().c_str(), stdout);
    return 0;
  }
  // Before the task: its data preparation already waits on rank 0, and a failure there must end the job.
  const std::unique_ptr<dist::Communicator> comm_owner =
      dist::make_communicator(recipe.string("train.dist_backend"), dist::launch_from_environment(),
                              train::recipe_device(recipe), recipe.real("train.dist_timeout_s"));
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
  const Device device = train::recipe_device(recipe);  // an unusable device fails here, before any data preparation
  train::check_schedule_before_data(recipe, comm.size());

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
        "on " + train::describe_device(device),
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
