#pragma once
// What every corpus metric (BLEU, chrF, TER) reports, and the two ways
// sacreBLEU 2.6.0 prints it: its text line and its JSON object. `cmha bleu`
// and the training's final evaluation print scores only through these, so
// the lines and results.json read the same everywhere.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace cmha::eval {

// The sacreBLEU release whose numbers, signatures and output formats the
// metrics reproduce.
inline constexpr const char* kSacrebleuVersion = "2.6.0";

// The signature's version field: cmha's own version and the sacreBLEU release
// it matches, "cmha-0.1.0+sacreBLEU-2.6.0" (sacreBLEU itself writes "2.6.0";
// a score from cmha says so).
std::string metric_version();

struct MetricScore {
  std::string name;       // "BLEU", "chrF2", "chrF2++", "TER"
  double score = 0.0;
  // "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:cmha-0.1.0+sacreBLEU-2.6.0"
  std::string signature;
  // What follows the score on BLEU's line ("93.0/77.2/65.1/55.2 (BP = 0.744 ...)");
  // empty for chrF and TER.
  std::string verbose;
  // With --confidence: the bootstrap mean and the half-width of its 95 %
  // interval, printed after the score as "(μ = 53.1 ± 5.8)".
  std::optional<double> confidence_mean, confidence_ci;

  // The score with `width` decimals and, with a confidence interval,
  // " (μ = 53.12 ± 5.77)": what --score-only prints.
  std::string score_text(int width = 2) const;
  // sacreBLEU's line: "BLEU|<signature> = 53.03 93.0/77.2/65.1/55.2 (BP = ...)",
  // the score with `width` decimals.
  std::string text(int width = 2) const;
  // sacreBLEU's -f json object: name, score (rounded to `width` decimals),
  // signature, verbose_score (BLEU), then each signature field, in that order.
  nlohmann::ordered_json json(int width = 2) const;
};

// The score with `width` decimals, as sacreBLEU's --score-only prints it.
std::string format_score(double score, int width);

// Several metrics as sacreBLEU prints one system's results, without a final
// newline: text lines right-aligned on their '=', or JSON objects (one, or an
// array of them, indented by 1). With score_only, just the scores (in JSON,
// bare numbers, as sacreBLEU does).
std::string format_results_text(const std::vector<MetricScore>& scores, int width, bool score_only = false);
std::string format_results_json(const std::vector<MetricScore>& scores, int width, bool score_only = false);

// The signature "k1:v1|k2:v2|..." of `fields`, the version field appended.
std::string make_signature(const std::vector<std::pair<std::string, std::string>>& fields);

// --- Reading the files, as sacreBLEU's command line reads them ----------------

// A UTF-8 text file as sacreBLEU's command line reads one: a segment per
// '\n'-terminated line (a last line without '\n' counts), trailing whitespace
// (including '\r') stripped. `role` names the file in errors ("hypothesis
// file", "reference"): a file that cannot be opened, or a line that is not
// valid UTF-8 (named by number), is a cmha::Error.
std::vector<std::string> read_segments(const std::string& path, const std::string& role);

// Hypotheses and their reference streams, each as long as the hypotheses.
struct MetricInput {
  std::vector<std::string> hyps;
  std::vector<std::vector<std::string>> refs;  // [reference file][segment]
};

// Reads the hypotheses (a file, or standard input when `hyp_path` is "-")
// and every reference file; a reference whose line count differs from the
// hypotheses' is an error naming both and both counts.
MetricInput read_metric_input(const std::string& hyp_path, const std::vector<std::string>& ref_paths);

}  // namespace cmha::eval
