// cmha sweep RECIPE --grid KEY=V1,V2 [--grid ...] --metric NAME -o DIR [--x KEY] [--threads T] [--jobs N]
//            [--rerun-changed] [key.path=value ...]
// Trains the recipe once per grid point, each run in DIR/<point name>/ as a
// separate `cmha train --resume` process (up to --jobs at once), then tabulates the runs'
// results.json (DIR/sweep.csv, DIR/sweep.md) and plots the metric against
// one numeric axis (DIR/sweep.png, through plot_sweep.py and matplotlib).
// Runs that already have results.json are skipped, so a sweep resumes; a run
// directory holding a run of another recipe is refused (or, with
// --rerun-changed, trained afresh with `cmha train --overwrite`).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cli/command_line.h"
#include "run/budget.h"
#include "run/recipe.h"
#include "tensor/error.h"
#include "study/sweep.h"
#include "study/sweep_runner.h"

namespace cmha::cli {
namespace {

namespace fs = std::filesystem;

const char* kSweepDescription =
    "Trains RECIPE once per combination of the grid values, each run in\n"
    "DIR/<name>/ (train.save_dir), e.g. DIR/type-concat_key_dim-64. Each run's\n"
    "final evaluation (results.json) is gathered into DIR/sweep.csv and\n"
    "DIR/sweep.md, and NAME is plotted against the x axis in DIR/sweep.png, one\n"
    "line per combination of the other axes. Runs that already have results.json\n"
    "are skipped, and an unfinished run resumes from its latest checkpoint, so\n"
    "running the same command again continues an interrupted sweep. A run\n"
    "directory that holds a run of another recipe (its recipe.yaml differs from\n"
    "the point's, e.g. after the recipe file changed) is refused, naming the first\n"
    "differing key, unless --rerun-changed trains it afresh.\n"
    "With --seeds N each point is trained N times, with train.seed = the\n"
    "recipe's seed, +1, ..., +N-1 (DIR/<name>_seed-S): sweep.csv keeps every run,\n"
    "sweep.md shows each point's mean ± standard deviation and n, and the plot\n"
    "draws the mean with error bars (one standard deviation) over faint markers\n"
    "for the seeds. --grid train.seed=... is read the same way.\n";

bool is_number(const std::string& s) {
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size();
}

}  // namespace

int sweep_command(const Args& args) {
  std::vector<std::string> positionals, grids;
  std::string metric, out_dir, x_key;
  long long threads = 0, jobs = 1, seeds = -1;
  bool rerun_changed = false;
  CommandLine cl("sweep", kSweepDescription);
  cl.app().add_option("recipe", positionals, "the recipe file, and key.path=value overrides applied to every run")
      ->type_name("RECIPE [key.path=value ...]");
  cl.app().add_option("--grid", grids, "a recipe key and its values (repeatable)")
      ->type_name("KEY=V1,V2,...")->allow_extra_args(false);
  cl.app().add_option("--metric", metric, "the results.json key to compare (top1, bleu, ...)")->type_name("NAME");
  cl.app().add_option("-o,--output", out_dir, "the sweep directory")->type_name("DIR");
  cl.app().add_option("--x", x_key,
                      "the grid key on the plot's x axis (default: the last numeric one), or a budget column: "
                      "parameters, attention_parameters, key_query_parameters, train_flops_per_token, "
                      "train_flops_per_image, kv_cache_bytes_per_token, kv_cache_key_bytes_per_token (the last "
                      "numeric grid key then makes no lines of its own)")
      ->type_name("KEY");
  cl.app().add_option("--threads", threads, "CPU threads of each run (default: the cores / N)")
      ->check(whole_number(1, 4096))->type_name("T");
  cl.app().add_option("--jobs", jobs,
                      "runs trained at the same time; with more than one, each run writes its messages to "
                      "DIR/<name>/train.log instead of the terminal")
      ->check(whole_number(1, 4096))->type_name("N")->capture_default_str();
  cl.app().add_option("--seeds", seeds,
                      "train each grid point N times with different train.seed values (replicates)")
      ->check(whole_number(1, 1000))->type_name("N");
  cl.app().add_flag("--rerun-changed", rerun_changed,
                    "train afresh (deleting its checkpoints and results) each run whose directory holds a run of "
                    "a different recipe, instead of refusing");
  if (!cl.parse(args)) return 0;
  const FileAndOverrides given = split_overrides(positionals, "sweep", "recipe");
  const std::string& recipe_path = given.file;
  const std::vector<std::string>& overrides = given.overrides;
  for (const std::string& o : overrides)
    CMHA_CHECK(o.rfind("train.save_dir=", 0) != 0,
               "cmha sweep sets train.save_dir of each run itself (DIR/<name>); drop '" + o + "'");
  std::vector<study::GridAxis> axes;
  for (const std::string& g : grids) axes.push_back(study::parse_grid_axis(g));
  CMHA_CHECK(!recipe_path.empty(), "cmha sweep needs a recipe (try 'cmha sweep --help')");
  CMHA_CHECK(!axes.empty(), "cmha sweep needs at least one --grid KEY=V1,V2,...");
  CMHA_CHECK(!metric.empty(), "cmha sweep needs --metric NAME (a key of the runs' results.json: top1, bleu, ...)");
  CMHA_CHECK(!out_dir.empty(), "cmha sweep needs -o DIR for the runs and the tables");
  if (seeds != -1) {
    CMHA_CHECK(study::seed_axis_index(axes) < 0,
               "--seeds and --grid train.seed=... both set the replicates: give one of them");
    axes.push_back(study::seed_axis(seeds, run::Recipe::load(recipe_path, overrides).integer(study::kSeedKey)));
  }

  // The x axis: given, or the last axis whose values are all numbers (not the seeds). A
  // budget column (run/budget.h) stands in for that axis: the lines are
  // the other axes' combinations.
  std::string numeric_axis;
  for (auto it = axes.rbegin(); numeric_axis.empty() && it != axes.rend(); ++it) {
    if (it->key == study::kSeedKey) continue;
    bool numeric = true;
    for (const auto& v : it->values) numeric = numeric && is_number(v);
    if (numeric) numeric_axis = it->key;
  }
  if (x_key.empty()) x_key = numeric_axis;
  const auto& budget = run::budget_keys();
  const bool x_budget = std::find(budget.begin(), budget.end(), x_key) != budget.end();
  bool x_known = x_key.empty() || x_budget;
  for (const auto& a : axes) x_known = x_known || a.key == x_key;
  std::string budget_list;
  for (const auto& k : budget) budget_list += (budget_list.empty() ? "" : ", ") + k;
  CMHA_CHECK(x_known, "--x " + x_key + " is not one of the --grid keys nor a budget column (" + budget_list + ")");
  CMHA_CHECK(x_key != study::kSeedKey, "--x train.seed: the seeds are replicates, not an axis to plot against");

  study::SweepOptions options{recipe_path, overrides, axes, metric, out_dir, threads, jobs, rerun_changed};
  options.stop_requested = [] { return interrupted(); };
  const study::SweepOutcome outcome = study::run_sweep(options);
  if (outcome.interrupted) throw Interrupted{};
  std::fputs(outcome.table.c_str(), stdout);
  std::fprintf(stderr, "cmha sweep: wrote %s and %s\n", outcome.csv_path.c_str(), outcome.md_path.c_str());

  if (x_key.empty()) {
    std::fprintf(stderr, "cmha sweep: no grid key has only numeric values, so no plot (choose one with --x)\n");
    return 0;
  }
  std::string keys, lines;
  for (const auto& a : axes) {
    keys += (keys.empty() ? "" : ",") + a.key;
    if (a.key != x_key && a.key != study::kSeedKey && !(x_budget && a.key == numeric_axis)) lines += (lines.empty() ? "" : ",") + a.key;
  }
  const fs::path png = fs::path(out_dir) / "sweep.png";
  // The tables are written: a missing matplotlib costs only the picture.
  int code = 2;
  std::vector<std::string> plot_args{outcome.csv_path, "--keys", keys,   "--lines", lines,
                                     "--x",            x_key,   "--metric", metric, "-o",      png.string()};
  if (study::seed_axis_index(axes) >= 0) plot_args.insert(plot_args.end(), {"--replicates", study::kSeedKey});
  try {
    code = run_plot_script(plot_script_path("plot_sweep.py"), plot_args);
  } catch (const Error&) {
  }
  if (code != 0)
    std::fprintf(stderr, "cmha sweep: %s not drawn (plot_sweep.py failed; needs python3-matplotlib)\n", png.c_str());
  return 0;
}

}  // namespace cmha::cli
