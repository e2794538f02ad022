#pragma once
// `cmha sweep`: a grid of recipe keys expanded into runs, and the runs'
// results.json files (run/run_results.h) gathered into a CSV and a
// markdown table. Generic: the keys and the metric are whatever the recipe
// and the task's final evaluation have.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run/recipe.h"

namespace cmha::study {

struct GridAxis {
  std::string key;                  // a registered recipe key, "model.attention.key_dim"
  std::vector<std::string> values;  // as written on the command line
};

// "KEY=V1,V2,...": the key must be registered (an unknown one names the
// nearest), the values non-empty.
GridAxis parse_grid_axis(const std::string& text);

struct GridPoint {
  std::string name;                    // run directory name, "type-concat_key_dim-256"
  std::vector<std::string> overrides;  // "model.attention.type=concat", ...
  std::vector<std::string> values;     // one per axis
};

// Every combination, the first axis varying slowest. Names use each key's last
// component ("key_dim"), or the whole key where two axes share one; a
// repeated axis is an error.
std::vector<GridPoint> expand_grid(const std::vector<GridAxis>& axes);

// Replicates: the grid axis of train.seed. `cmha sweep --seeds N` adds it
// (last, so a point's seeds sit together) with the values first_seed ..
// first_seed + N - 1; a --grid train.seed=... is the same axis. The tables
// then summarise each point over its seeds.
inline constexpr const char* kSeedKey = "train.seed";
GridAxis seed_axis(long long count, long long first_seed);
// The index of the train.seed axis, or -1.
int seed_axis_index(const std::vector<GridAxis>& axes);

// Whether the run directory `dir` may go on as a run of `wanted` (resumed,
// or its results.json reused): "" when it holds no run, or a run whose
// recipe.yaml resolves as `wanted` does; otherwise why not, as the end of a
// sentence ("its recipe.yaml has model.attention.key_dim 16, this point 32").
// Keys of how a run goes, not what it computes (train.save_dir,
// train.threads, train.log_every, data.workers, data.prefetch), are not compared.
std::string stale_run_reason(const std::string& dir, const run::Recipe& wanted);

struct SweepRow {
  GridPoint point;
  nlohmann::json results;  // the run's results.json
};

// A number as the tables print it: whole numbers as integers; otherwise two
// decimals from 10 up, four below.
std::string table_number(double v);

// The numeric result keys of all rows, `metric` first then alphabetical; a row
// without a numeric `metric` is an error naming its run.
std::vector<std::string> result_columns(const std::vector<SweepRow>& rows, const std::string& metric);
// name, the axes' keys, then the result columns; empty cells where a run
// lacks a key. Every run is a row, replicates too.
std::string sweep_csv(const std::vector<GridAxis>& axes, const std::vector<SweepRow>& rows, const std::string& metric);
// A row per run; with a train.seed axis, a row per combination of the other
// axes instead: n (the seeds) and each result as mean ± sample standard
// deviation (the value alone, an integer as one, where n is 1 or the seeds agree).
std::string sweep_markdown(const std::vector<GridAxis>& axes, const std::vector<SweepRow>& rows,
                           const std::string& metric);

}  // namespace cmha::study
