// cmha sweep: the grid, the tables, and a real sweep of tiny runs (resumed).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "run/run_results.h"
#include "support/check.h"
#include "support/files.h"
#include "support/text.h"
#include "support/tiny_images.h"
#include "tensor/error.h"
#include "study/sweep.h"
#include "support/source_paths.h"

using namespace cmha;
using test::error_of;
using namespace cmha::study;
using namespace cmha::run;
namespace fs = std::filesystem;

namespace {
using cmha::test::has;


// A tiny ViT recipe (dir/tiny.yaml, `max_updates` updates) on tiny image files in
// dir; returns the data and model overrides every sweep of it passes.
std::string write_tiny_sweep_recipe(const std::string& dir, long long max_updates) {
  test::write_tiny_fashion_mnist(dir, 32, 10);
  std::ofstream(dir + "/tiny.yaml") << "train: {task: image_classification, max_updates: " << max_updates
                                    << ", max_epochs: 0}\n"
                                       "model: {kind: vit, image_size: 28, patch_size: 7, channels: 1, num_classes: 10}\n";
  const std::string overrides = test::tiny_vit_overrides(dir, "unused");
  return overrides.substr(0, overrides.find(" train.save_dir"));
}
}  // namespace

TEST(SweepGrid, ExpandsEveryCombinationFirstAxisSlowest) {
  const auto points = expand_grid({parse_grid_axis("model.attention.type=concat,collaborative"),
                                   parse_grid_axis("model.attention.key_dim=64,8")});
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0].name, "type-concat_key_dim-64");
  EXPECT_EQ(points[1].name, "type-concat_key_dim-8");
  EXPECT_EQ(points[3].name, "type-collaborative_key_dim-8");
  EXPECT_EQ(points[2].overrides,
            (std::vector<std::string>{"model.attention.type=collaborative", "model.attention.key_dim=64"}));
  // Two axes with the same last component are named by their whole keys.
  const auto both = expand_grid({parse_grid_axis("model.encoder_attention.key_dim=8"),
                                 parse_grid_axis("model.decoder_attention.key_dim=4")});
  EXPECT_EQ(both[0].name, "model.encoder_attention.key_dim-8_model.decoder_attention.key_dim-4");
}

TEST(SweepGrid, Errors) {
  EXPECT_TRUE(has(error_of([] { parse_grid_axis("model.attention.key_dimm=1,2"); }),
                  "'model.attention.key_dimm' is not a recipe key (did you mean 'model.attention.key_dim'?)"));
  EXPECT_TRUE(has(error_of([] { parse_grid_axis("model.depth"); }), "--grid needs KEY=V1,V2,..., got 'model.depth'"));
  EXPECT_TRUE(has(error_of([] { parse_grid_axis("model.depth=1,,2"); }), "--grid model.depth has an empty value"));
  EXPECT_TRUE(has(error_of([] { expand_grid({parse_grid_axis("model.depth=1"), parse_grid_axis("model.depth=2")}); }),
                  "--grid model.depth is given twice"));
}

TEST(SweepTables, CsvAndMarkdownWithTheMetricFirst) {
  const std::vector<GridAxis> axes{parse_grid_axis("model.attention.key_dim=64,8")};
  const auto points = expand_grid(axes);
  std::vector<SweepRow> rows{{points[0], {{"top1", 88.25}, {"loss", 0.3125}, {"checkpoint", "best"}}},
                             {points[1], {{"top1", 80.0}, {"loss", 0.5}, {"samples", 10000}}}};
  EXPECT_EQ(sweep_csv(axes, rows, "top1"),
            "name,model.attention.key_dim,top1,loss,samples\n"
            "key_dim-64,64,88.25,0.3125,\n"
            "key_dim-8,8,80.0,0.5,10000\n");
  EXPECT_EQ(sweep_markdown(axes, rows, "top1"),
            "| model.attention.key_dim | top1 | loss | samples |\n"
            "|---|---:|---:|---:|\n"
            "| 64 | 88.25 | 0.3125 |  |\n"
            "| 8 | 80 | 0.5000 | 10000 |\n");
  rows[1].results.erase("top1");
  EXPECT_TRUE(has(error_of([&] { sweep_csv(axes, rows, "top1"); }), "run 'key_dim-8' has no numeric 'top1'"));
}

TEST(SweepSeeds, ReplicatesAreATrainSeedAxisSummarisedAsMeanStdAndN) {
  const GridAxis seeds = seed_axis(3, 5);
  EXPECT_EQ(seeds.key, "train.seed");
  EXPECT_EQ(seeds.values, (std::vector<std::string>{"5", "6", "7"}));
  const std::vector<GridAxis> axes{parse_grid_axis("model.attention.key_dim=64,8"), seed_axis(2, 1)};
  EXPECT_EQ(seed_axis_index(axes), 1);
  EXPECT_EQ(seed_axis_index({axes[0]}), -1);
  const auto points = expand_grid(axes);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0].name, "key_dim-64_seed-1");
  EXPECT_EQ(points[1].name, "key_dim-64_seed-2");
  EXPECT_EQ(points[1].overrides, (std::vector<std::string>{"model.attention.key_dim=64", "train.seed=2"}));
  const std::vector<SweepRow> rows{{points[0], {{"top1", 88.0}, {"loss", 0.25}, {"samples", 10000}}},
                                   {points[1], {{"top1", 86.0}, {"loss", 0.35}, {"samples", 10000}}},
                                   {points[2], {{"top1", 80.0}, {"loss", 0.5}, {"samples", 10000}}},
                                   {points[3], {{"top1", 81.0}, {"samples", 10000}}}};
  // Every run in the CSV ...
  EXPECT_EQ(sweep_csv(axes, rows, "top1"),
            "name,model.attention.key_dim,train.seed,top1,loss,samples\n"
            "key_dim-64_seed-1,64,1,88.0,0.25,10000\n"
            "key_dim-64_seed-2,64,2,86.0,0.35,10000\n"
            "key_dim-8_seed-1,8,1,80.0,0.5,10000\n"
            "key_dim-8_seed-2,8,2,81.0,,10000\n");
  // ... and each point's mean ± sample standard deviation over its seeds in the table.
  EXPECT_EQ(sweep_markdown(axes, rows, "top1"),
            "| model.attention.key_dim | n | top1 (mean ± std) | loss (mean ± std) | samples (mean ± std) |\n"
            "|---|---:|---:|---:|---:|\n"
            "| 64 | 2 | 87.00 ± 1.41 | 0.3000 ± 0.0707 | 10000 |\n"
            "| 8 | 2 | 80.50 ± 0.71 | 0.5000 | 10000 |\n");
  EXPECT_TRUE(has(error_of([] { seed_axis(0, 1); }), "--seeds needs a number of replicates of 1 or more, got 0"));
  EXPECT_TRUE(has(error_of([] { seed_axis(-2, 1); }), "got -2"));
}

TEST(SweepCli, SeedsTrainEachPointNTimes) {
  const std::string dir = test::temp_dir("sweep_seeds");
  const std::string args = dir + "/tiny.yaml --threads 1 --grid model.attention.key_dim=8 --seeds 2 --metric top1 -o " +
                           dir + "/sweep " + write_tiny_sweep_recipe(dir, 2);
  const test::CommandResult r = test::run_cmha("sweep " + args);
  ASSERT_EQ(r.code, 0) << r.output;
  // The recipe's seed (1) and the next.
  for (const char* name : {"key_dim-8_seed-1", "key_dim-8_seed-2"}) {
    EXPECT_TRUE(fs::exists(run_results_path(dir + "/sweep/" + name))) << name;
    EXPECT_TRUE(has(test::read_file(dir + "/sweep/" + name + "/recipe.yaml"),
                    std::string("seed: ") + name[std::string(name).size() - 1]))
        << name;
  }
  EXPECT_TRUE(has(test::read_file(dir + "/sweep/sweep.csv"), "\nkey_dim-8_seed-2,8,2,")) << r.output;
  EXPECT_TRUE(has(r.output, "| model.attention.key_dim | n | top1 (mean ± std) |")) << r.output;
  EXPECT_TRUE(has(r.output, "| 8 | 2 | ")) << r.output;
  fs::remove_all(dir);
}

TEST(SweepCli, RunsEveryPointTabulatesAndResumes) {
  const std::string dir = test::temp_dir("sweep_cli");
  const std::string args = dir + "/tiny.yaml --threads 1 --grid model.attention.type=concat,collaborative "
                           "--grid model.attention.key_dim=8,4 --metric top1 -o " + dir + "/sweep " +
                           write_tiny_sweep_recipe(dir, 2);
  test::CommandResult r = test::run_cmha("sweep " + args);
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* name : {"type-concat_key_dim-8", "type-concat_key_dim-4", "type-collaborative_key_dim-8",
                           "type-collaborative_key_dim-4"})
    EXPECT_TRUE(fs::exists(run_results_path(dir + "/sweep/" + name))) << name;
  const std::string csv = test::read_file(dir + "/sweep/sweep.csv");
  EXPECT_EQ(csv.rfind("name,model.attention.type,model.attention.key_dim,top1,", 0), 0u) << csv;
  EXPECT_TRUE(has(csv, "\ntype-collaborative_key_dim-4,collaborative,4,")) << csv;
  EXPECT_TRUE(has(test::read_file(dir + "/sweep/sweep.md"), "| collaborative | 4 | ")) << r.output;
  EXPECT_TRUE(has(r.output, "| model.attention.type | model.attention.key_dim | top1 |")) << r.output;
  EXPECT_TRUE(fs::exists(dir + "/sweep/sweep.png")) << r.output;

  // Again: every run is skipped, and the tables come back the same.
  r = test::run_cmha("sweep " + args);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "[4/4] type-collaborative_key_dim-4 has results.json, skipped")) << r.output;
  EXPECT_FALSE(has(r.output, "cmha train:")) << r.output;
  EXPECT_EQ(test::read_file(dir + "/sweep/sweep.csv"), csv);

  // A bad grid value fails before any run starts.
  r = test::run_cmha("sweep " + dir + "/tiny.yaml --grid model.attention.key_dim=8,wide --metric top1 -o " + dir + "/bad");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "model.attention.key_dim")) << r.output;
  EXPECT_FALSE(fs::exists(dir + "/bad/key_dim-8")) << r.output;
  fs::remove_all(dir);
}

// Two runs at once, each with its own log; a run that fails does not stop the
// other, and the sweep names it afterwards.
TEST(SweepCli, JobsRunSideBySideWithTheirOwnLogs) {
  const std::string dir = test::temp_dir("sweep_jobs");
  const std::string overrides = write_tiny_sweep_recipe(dir, 2);
  // key_dim 3 is a valid recipe value but no 2 heads can split it: that run fails when it builds its model.
  const std::string args = dir + "/tiny.yaml --jobs 2 --grid model.attention.type=concat "
                           "--grid model.attention.key_dim=8,3 --metric top1 -o " + dir + "/sweep " +
                           overrides;
  const test::CommandResult r = test::run_cmha("sweep " + args);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "started, messages in " + dir + "/sweep/type-concat_key_dim-8/train.log")) << r.output;
  EXPECT_TRUE(has(r.output, "type-concat_key_dim-8 finished")) << r.output;
  EXPECT_TRUE(has(r.output, "sweep run type-concat_key_dim-3 (exit 2) failed (see their train.log)")) << r.output;
  EXPECT_FALSE(has(r.output, "cmha train:")) << r.output;  // the runs' own messages are in their logs
  EXPECT_TRUE(fs::exists(run_results_path(dir + "/sweep/type-concat_key_dim-8")));
  EXPECT_TRUE(has(test::read_file(dir + "/sweep/type-concat_key_dim-8/train.log"), "cmha train:"));
  EXPECT_TRUE(has(test::read_file(dir + "/sweep/type-concat_key_dim-3/train.log"), "key_dim"));

  // A run log that cannot be written (here a folder in its place) is an error naming it, before the run starts.
  fs::remove_all(dir + "/sweep/type-concat_key_dim-3");
  fs::create_directories(dir + "/sweep/type-concat_key_dim-3/train.log");
  const test::CommandResult bad = test::run_cmha("sweep " + args);
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_TRUE(has(bad.output, "cannot write the run log '" + dir + "/sweep/type-concat_key_dim-3/train.log'")) << bad.output;
  fs::remove_all(dir);
}

// A SIGTERM sent to the sweep process alone (kill, a batch scheduler) stops
// its runs too: each saves a checkpoint and leaves no results.json, and the
// sweep exits 130, so running it again resumes them.
TEST(SweepCli, SigtermStopsTheRunningRuns) {
  const std::string dir = test::temp_dir("sweep_sigterm");
  const std::string overrides = write_tiny_sweep_recipe(dir, 1000000);
  const std::string log = dir + "/sweep/key_dim-8/train.log";
  // The sweep in the background; once its run has logged an update, SIGTERM to the sweep's pid only.
  // A watchdog kills what is left after 60 s, so a sweep that ignores the signal fails the test (137)
  // instead of hanging it.
  const std::string script =
      "cd " + dir + "; " + CMHA_BINARY_DIR + "/cmha sweep tiny.yaml --jobs 2 --grid model.attention.key_dim=8 "
      "--metric top1 -o " + dir + "/sweep " + overrides +
      " > sweep.out 2>&1 & s=$!; "
      "for i in $(seq 600); do grep -q '^epoch' " + log + " 2>/dev/null && break; sleep 0.1; done; "
      "kill -TERM $s; "
      "(sleep 60; kill -KILL $s; pkill -KILL -f '" + dir + "/sweep/key_dim-8') > /dev/null 2>&1 & w=$!; "
      "wait $s; echo $? > sweep.rc; kill $w";
  ASSERT_EQ(std::system(script.c_str()), 0);
  EXPECT_EQ(test::read_file(dir + "/sweep.rc"), "130\n") << test::read_file(dir + "/sweep.out");
  EXPECT_FALSE(fs::exists(run_results_path(dir + "/sweep/key_dim-8")));
  EXPECT_TRUE(has(test::read_file(log), "interrupted")) << test::read_file(log);
  bool saved = false;
  for (const auto& e : fs::directory_iterator(dir + "/sweep/key_dim-8"))
    saved = saved || e.path().filename().string().rfind("checkpoint_", 0) == 0;
  EXPECT_TRUE(saved) << test::read_file(log);
  fs::remove_all(dir);
}

TEST(SweepCli, ArgumentErrors) {
  auto code_and = [](const std::string& args, const std::string& part) {
    const test::CommandResult r = test::run_cmha("sweep " + args);
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_TRUE(has(r.output, part)) << r.output;
  };
  code_and("r.yaml --metric top1 -o d", "cmha sweep needs at least one --grid");
  code_and("r.yaml --grid model.depth=1 -o d", "cmha sweep needs --metric NAME");
  code_and("r.yaml --grid model.depth=1 --metric top1", "cmha sweep needs -o DIR");
  code_and("--grid model.depth=1 --metric top1 -o d", "cmha sweep needs a recipe");
  code_and("r.yaml --grid model.depth=1 --metric top1 -o d train.save_dir=x", "sets train.save_dir of each run itself");
  code_and("r.yaml --grid model.depth=1 --metric top1 -o d --jobs 0", "--jobs");
  code_and("r.yaml --grid model.depth=1 --metric top1 -o d --x model.d_model", "--x model.d_model is not one of the --grid keys");
  code_and("/nonexistent.yaml --grid model.depth=1 --metric top1 -o d", "/nonexistent.yaml");
  code_and("r.yaml --grid model.depth=1 --metric top1 -o d --seeds 0", "--seeds");
  code_and("r.yaml --grid model.depth=1 --metric top1 -o d --seeds 0", "from 1 to 1000, not '0'");
  code_and("r.yaml --grid train.seed=1,2 --metric top1 -o d --seeds 2", "--seeds and --grid train.seed=... both");
  EXPECT_EQ(test::run_cmha("sweep --help").code, 0);
}

TEST(SweepStale, ARunDirectoryOfAnotherRecipeSaysTheFirstDifferingKey) {
  const std::string dir = test::temp_dir("sweep_stale_unit");
  const Recipe wanted = Recipe::parse("model: {attention: {key_dim: 32}}\ntrain: {save_dir: " + dir + "}\n");
  EXPECT_EQ(stale_run_reason(dir + "/none", wanted), "");  // no directory: nothing to go on from
  fs::create_directories(dir);
  EXPECT_EQ(stale_run_reason(dir, wanted), "");  // an empty one neither
  // The same recipe, written as the run wrote it (another save_dir and thread count do not count).
  std::ofstream(dir + "/recipe.yaml") << Recipe::parse("train: {save_dir: elsewhere, threads: 3}\n", "r",
                                                       {"model.attention.key_dim=32"}).dump();
  EXPECT_EQ(stale_run_reason(dir, wanted), "");
  std::ofstream(dir + "/recipe.yaml") << Recipe::parse("model: {attention: {key_dim: 16}}\n").dump();
  EXPECT_EQ(stale_run_reason(dir, wanted), "its recipe.yaml has model.attention.key_dim 16, this point 32");
  // Results without a recipe to say of what.
  fs::remove(dir + "/recipe.yaml");
  std::ofstream(dir + "/results.json") << "{\"top1\": 50}\n";
  EXPECT_EQ(stale_run_reason(dir, wanted), "it holds a run (results.json) but no recipe.yaml that says of which recipe");
  fs::remove_all(dir);
}

// A sweep whose run directory holds a run of a different recipe (the recipe
// file changed since) refuses rather than reprint that run's stale results,
// and --rerun-changed trains it afresh.
TEST(SweepCli, ARunOfADifferentRecipeIsRefusedOrRerun) {
  const std::string dir = test::temp_dir("sweep_stale");
  const std::string overrides = write_tiny_sweep_recipe(dir, 2);
  const std::string args = dir + "/tiny.yaml --threads 1 --grid model.attention.key_dim=8 --metric top1 -o " + dir +
                           "/sweep " + overrides;
  test::CommandResult r = test::run_cmha("sweep " + args);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string run = dir + "/sweep/key_dim-8";
  // The recipe changes: 3 updates instead of 2.
  write_tiny_sweep_recipe(dir, 3);
  r = test::run_cmha("sweep " + args);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "the run directory '" + run + "' holds a run of a different recipe (its recipe.yaml has "
                            "train.max_updates 2, this point 3): pass --rerun-changed")) << r.output;
  EXPECT_FALSE(has(r.output, "| model.attention.key_dim |")) << r.output;  // no stale table
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
  r = test::run_cmha("sweep --rerun-changed " + args);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "key_dim-8 (afresh: its directory held a run of a different recipe)")) << r.output;
  EXPECT_TRUE(has(test::read_file(run + "/recipe.yaml"), "max_updates: 3")) << test::read_file(run + "/recipe.yaml");
  EXPECT_TRUE(has(r.output, "--overwrite: removed")) << r.output;  // not resumed from the old run's update 2
  EXPECT_TRUE(fs::exists(run + "/checkpoint_3.safetensors"));
  // Now of the same recipe: skipped, the table printed.
  r = test::run_cmha("sweep " + args);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "key_dim-8 has results.json, skipped")) << r.output;
  EXPECT_TRUE(has(r.output, "| model.attention.key_dim |")) << r.output;
  fs::remove_all(dir);
}
