// cmha train [RECIPE] [--resume | --overwrite] [--dump-config] [--threads T] [key.path=value ...]
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "cli/command_line.h"
#include "distributed/launch.h"
#include "run/device.h"
#include "run/options.h"
#include "run/run_dir.h"
#include "tensor/error.h"
#include "train/training_run.h"

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
std::string key_values(const run::OptionSpec& spec) {
  std::string out = run::option_type_name(spec.type);
  if (!spec.choices.empty()) {
    out = "one of";
    for (size_t i = 0; i < spec.choices.size(); ++i) out += (i == 0 ? " " : "|") + spec.choices[i];
  }
  return out;
}

// Every key of the registry: what it takes, its default, whom it is for, its help.
void print_keys() {
  std::printf("\nrecipe keys (values, default: help [the models and tasks that read it, when not all]):\n");
  for (const auto& spec : run::option_registry()) {
    const std::string def = spec.default_value.empty() ? "inherits " + spec.inherit_from : spec.default_value;
    const std::string who = run::option_applies_to(spec);
    std::printf("  %-36s %s, %s: %s%s\n", spec.path.c_str(), key_values(spec).c_str(), def.c_str(), spec.help.c_str(),
                who.empty() ? "" : (" [" + who + "]").c_str());
  }
}

// The keys `recipe` reads, with their resolved values and where each was set.
void print_resolved_keys(const run::Recipe& recipe, const std::string& name) {
  std::printf("\nrecipe keys of %s (model.kind %s, train.task %s), resolved (value  help  [where set]):\n", name.c_str(),
              recipe.string("model.kind").c_str(), recipe.string("train.task").c_str());
  for (const auto& spec : run::option_registry()) {
    if (!recipe.reads(spec.path)) continue;
    const std::string where = recipe.origin(spec.path);
    std::printf("  %-36s %-14s %s%s\n", spec.path.c_str(), recipe.text(spec.path).c_str(), spec.help.c_str(),
                where == "default" ? "" : ("  [" + where + "]").c_str());
  }
}

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
    else print_resolved_keys(run::Recipe::load(recipe_path, overrides), recipe_path);
    return 0;
  }
  CMHA_CHECK(!(resume && overwrite), "--resume continues the run in train.save_dir and --overwrite "
                                     "deletes it: give one of them");
  std::optional<run::Recipe> loaded;
  if (resume && recipe_path.empty()) {
    // Continue the run's own recipe, not the built-in one it may never have used (whose keys the overrides may not fit).
    std::vector<std::string> dir_override;
    for (const std::string& o : overrides)
      if (o.rfind("train.save_dir=", 0) == 0) dir_override.push_back(o);
    const std::string dir =
        run::Recipe::parse(default_recipe_text(), default_recipe_name(), dir_override).string("train.save_dir");
    const std::string stored = (std::filesystem::path(dir) / "recipe.yaml").string();
    if (std::filesystem::is_regular_file(stored)) {
      recipe_path = stored;
      loaded = run::Recipe::load_stored(recipe_path, overrides);
    } else {
      // Only the built-in recipe's own run may resume without a recipe file.
      const std::string own = run::Recipe::parse(default_recipe_text(), default_recipe_name(), {}).string("train.save_dir");
      CMHA_CHECK(dir == own, "--resume without a recipe continues the run in train.save_dir '" + dir +
                                 "', but it holds no run (no " + stored + "): give the recipe too");
    }
  }
  if (!loaded)
    loaded = recipe_path.empty() ? run::Recipe::parse(default_recipe_text(), default_recipe_name(), overrides)
                                 : run::Recipe::load(recipe_path, overrides);
  const run::Recipe& recipe = *loaded;
  const run::RunStart start = resume ? run::RunStart::resume
                                       : (overwrite ? run::RunStart::overwrite : run::RunStart::fresh);
  if (dump) {
    std::fputs(recipe.dump().c_str(), stdout);
    return 0;
  }
  // Before the task: its data preparation already waits on rank 0, and a failure there must end the job.
  const std::unique_ptr<distributed::Communicator> comm_owner =
      distributed::make_communicator(recipe.string("train.dist_backend"), distributed::launch_from_environment(),
                                     run::recipe_device(recipe), recipe.real("train.dist_timeout_s"));
  distributed::Communicator& comm = *comm_owner;
  train::TrainingRunOptions options;
  options.recipe_name = recipe_path.empty() ? std::string(default_recipe_name()) : recipe_path;
  options.start = start;
  options.threads = threads;
  options.stop_requested = [] { return interrupted(); };
  return distributed::run_or_abort(comm, [&] {
    if (!train::run_training(recipe, options, comm)) throw Interrupted{};
    return 0;
  });
}

}  // namespace cmha::cli
