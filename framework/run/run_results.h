#pragma once
// <run dir>/results.json: a run's final evaluation as one flat JSON object
// ({"bleu": 24.1, "top1": 0.89, ...}), written once training ends and read by
// `cmha sweep` to tabulate runs.
#include <nlohmann/json.hpp>
#include <string>

namespace cmha::run {

std::string run_results_path(const std::string& run_dir);
// Atomic: a temporary file renamed over results.json.
void write_run_results(const std::string& run_dir, const nlohmann::json& results);
// The object, or a cmha::Error naming the file when it is missing or not JSON.
nlohmann::json read_run_results(const std::string& run_dir);

}  // namespace cmha::run
