#pragma once
// How sacreBLEU 2.6.0 prints a paired test (utils.py print_results_table):
// its table (tabulate's fancy_grid: systems in rows, a column per metric,
// the p-value under each score), the explanation beneath, the signatures;
// or its JSON, a list of {system, <metric>: {score, p_value, mean, ci}}.
#include <string>
#include <vector>

#include "eval/significance.h"

namespace cmha::eval {

struct PairedReport {
  std::vector<std::string> systems;               // names, the first "Baseline: <file>"
  std::vector<std::vector<TestResult>> results;   // [system][metric]
  bool bootstrap = true;                          // --paired-bs, else --paired-ar
  int samples = 0;                                // resamples or trials
};

// The table and the text after it, without a final newline; scores and
// means with `width` decimals, p-values with 4.
std::string format_paired_text(const PairedReport& report, int width);
// json.dumps(..., indent=4): full-precision numbers (shortest round trip).
std::string format_paired_json(const PairedReport& report);

}  // namespace cmha::eval
