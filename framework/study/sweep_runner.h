#pragma once
// The sweep's runner: each grid point trained by a separate `cmha train`
// process (up to `jobs` at once, each in out_dir/<point name>/), then the
// runs' results.json gathered into out_dir/sweep.csv and sweep.md. `cmha
// sweep` (cli/sweep.cpp) parses its arguments into SweepOptions and draws the
// plot; everything else is here.
#include <functional>
#include <string>
#include <vector>

#include "study/sweep.h"

namespace cmha::study {

struct SweepOptions {
  std::string recipe_path;
  std::vector<std::string> overrides;  // applied to every run
  std::vector<GridAxis> axes;
  std::string metric;                  // the results.json key the tables lead with
  std::string out_dir;
  long long threads = 0;               // of each run; 0: the cores / jobs when jobs > 1
  long long jobs = 1;
  bool rerun_changed = false;          // a directory holding another recipe's run is trained afresh, not refused
  std::string executable;              // the cmha that trains each point ("" = this process's own)
  std::function<bool()> stop_requested = [] { return false; };  // polled while runs go on (Ctrl-C)
};

struct SweepOutcome {
  bool interrupted = false;  // a run or the sweep was stopped: nothing tabulated
  std::string csv_path, md_path;
  std::string table;         // sweep.md's text
};

// Checks every point's recipe and run directory before the first run starts
// (a bad value fails in seconds, not hours), trains the points that have no
// results.json (an unfinished one resumes), then writes the tables. A failed
// run is an error naming it, after the others have finished.
SweepOutcome run_sweep(const SweepOptions& options);

}  // namespace cmha::study
