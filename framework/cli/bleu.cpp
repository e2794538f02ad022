// cmha bleu REF... [-i HYP]: corpus BLEU, chrF and TER of one system's
// hypotheses (a file, or standard input as `sacrebleu REF < HYP`), with
// sacreBLEU 2.6.0's options, numbers, signatures and output formats.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cli/command_line.h"
#include "eval/bleu.h"
#include "eval/chrf.h"
#include "eval/metric_score.h"
#include "eval/significance.h"
#include "eval/significance_report.h"
#include "eval/ter.h"
#include "tensor/error.h"

namespace cmha::cli {

namespace {

// sacreBLEU's options with a one-dash name longer than one letter, which
// CLI11 cannot declare: spelled as their long names before parsing.
const std::map<std::string, std::string> kSacrebleuAliases = {
    {"-tok", "--tokenize"},        {"-lc", "--lowercase"},        {"-sv", "--smooth-value"},
    {"-cc", "--chrf-char-order"},  {"-cw", "--chrf-word-order"},  {"-nc", "--no-color"},
    {"-ci", "--confidence"},       {"-cin", "--confidence-n"},    {"-pbs", "--paired-bs"},
    {"-par", "--paired-ar"},       {"-pbsn", "--paired-bs-n"},    {"-parn", "--paired-ar-n"},
};

// Warnings sacreBLEU would not print but a person wants to see; -q silences them.
void warn_about_input(const eval::MetricInput& in, const std::vector<std::string>& ref_paths, bool bleu, bool force) {
  for (size_t r = 0; r < in.refs.size(); ++r) {
    size_t empty = 0, first = 0;
    for (size_t i = 0; i < in.refs[r].size(); ++i)
      if (in.refs[r][i].empty() && empty++ == 0) first = i + 1;
    if (empty > 0)
      std::fprintf(stderr,
                   "cmha bleu: reference '%s' has %zu empty line%s (the first is line %zu), scored as references "
                   "without words, as sacreBLEU does\n",
                   ref_paths[r].c_str(), empty, empty == 1 ? "" : "s", first);
  }
  // sacreBLEU's check for tokenized input (BLEU only; --force silences it).
  size_t tokenized = 0;
  for (const std::string& h : in.hyps) tokenized += h.size() >= 2 && h.compare(h.size() - 2, 2, " .") == 0;
  if (bleu && !force && tokenized >= 100)
    std::fprintf(stderr,
                 "cmha bleu: %zu hypotheses end in a tokenized period (' .'): BLEU expects detokenized text "
                 "(--force silences this)\n",
                 tokenized);
}

// --paired-bs / --paired-ar: the systems of `inputs` (the first the
// baseline) against the references, as sacreBLEU's multi-system mode.
int paired_test_command(const std::vector<std::string>& refs, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& metrics, eval::BleuOptions bleu, double smooth_value,
                        const eval::ChrfOptions& chrf, bool bootstrap, int samples, const std::string& format,
                        int width) {
  if (smooth_value >= 0.0) bleu.smooth_value = smooth_value;
  eval::PairedReport report;
  std::vector<std::vector<std::string>> systems;
  std::vector<std::vector<std::string>> ref_streams;
  for (const std::string& path : inputs) {
    // sacreBLEU names a system by its file and skips the baseline given twice.
    if (std::find(report.systems.begin(), report.systems.end(), path) != report.systems.end()) {
      CMHA_CHECK(path == report.systems[0], "system '" + path + "' is given twice: each system needs its own file");
      continue;
    }
    const eval::MetricInput in = eval::read_metric_input(path, refs);
    CMHA_CHECK(!in.hyps.empty(), "hypothesis file '" + path + "' holds no hypotheses: nothing to test");
    if (ref_streams.empty()) ref_streams = in.refs;
    systems.push_back(in.hyps);
    report.systems.push_back(path);
  }
  CMHA_CHECK(systems.size() >= 2, "a paired test needs a system besides the baseline '" + inputs[0] + "'");
  report.systems[0] = "Baseline: " + report.systems[0];

  std::vector<std::unique_ptr<eval::ResampledMetric>> owned;
  // sacreBLEU runs the metrics in the order asked for.
  for (const std::string& m : metrics) {
    if (m == "bleu") owned.push_back(eval::make_bleu_metric(ref_streams, bleu));
    if (m == "chrf") owned.push_back(eval::make_chrf_metric(ref_streams, chrf));
  }
  std::vector<const eval::ResampledMetric*> used;
  for (const auto& m : owned) used.push_back(m.get());
  report.bootstrap = bootstrap;
  report.samples = samples;
  report.results = eval::paired_test(used, systems, bootstrap, samples);
  const std::string out = format == "json" ? eval::format_paired_json(report) : eval::format_paired_text(report, width);
  std::printf("%s\n", out.c_str());
  return 0;
}

}  // namespace

int bleu_command(const Args& raw_args) {
  Args args;
  for (const std::string& a : raw_args) {
    const auto alias = kSacrebleuAliases.find(a);
    args.push_back(alias == kSacrebleuAliases.end() ? a : alias->second);
    CMHA_CHECK(a != "--ref" && a != "--hyp",
               "cmha bleu takes its arguments as sacreBLEU does: the reference files first, then -i HYP (or the "
               "hypotheses on standard input), not '" + a + "' (see 'cmha bleu --help')");
  }

  std::vector<std::string> refs, inputs, metrics = {"bleu"};
  std::string format = "text";
  int width = 2;
  bool score_only = false, quiet = false, force = false, no_color = false;
  eval::BleuOptions bleu;
  double smooth_value = -1.0;
  eval::ChrfOptions chrf;
  eval::TerOptions ter;

  CommandLine cl("bleu",
                 "Scores one system's detokenized hypotheses (one segment per line) against one or more\n"
                 "reference files of the same length with BLEU, chrF/chrF++ and TER, as sacreBLEU 2.6.0 does:\n"
                 "the same options, the same numbers (to the last printed digit), signatures and output.\n"
                 "  cmha bleu REF [REF ...] -i HYP [-m bleu chrf ter] [-f json] [-w N]\n"
                 "  cmha translate MODEL < src | cmha bleu REF\n"
                 "Unlike sacreBLEU, the default output is the text line with 2 decimals (sacreBLEU's is\n"
                 "JSON with 1: -f json -w 1). A signature's version reads cmha-<version>+sacreBLEU-2.6.0:\n"
                 "cmha's version, and the sacreBLEU release it reproduces.\n"
                 "Statistical tests, on BLEU and chrF, drawing sacreBLEU's own resamples (numpy's\n"
                 "default_rng(12345)), so means, intervals and p-values are sacreBLEU's:\n"
                 "  cmha bleu REF -i HYP --confidence                      one system's 95 % interval\n"
                 "  cmha bleu REF -i BASELINE SYS2 ... --paired-bs         paired bootstrap resampling\n"
                 "  cmha bleu REF -i BASELINE SYS2 ... --paired-ar         approximate randomization\n"
                 "Not available: test-set downloads (-t), several systems without a paired test,\n"
                 "sentence-level scores, tests on TER, tab-separated systems or references, short\n"
                 "signatures, and the zh, ja-mecab, ko-mecab, spm and flores tokenizers.");
  CLI::App& app = cl.app();
  app.add_option("refs", refs, "the reference files, each line the reference of the same hypothesis line")
      ->type_name("REF");
  app.add_option("-i,--input", inputs,
                 "the hypotheses (default: standard input); give the references before it; with a paired "
                 "test, the baseline's first, then the other systems'")
      ->type_name("HYP");
  app.add_option("-m,--metrics", metrics, "the metrics to compute, printed in the order BLEU, chrF, TER")
      ->check(one_of({"bleu", "chrf", "ter"}))
      ->capture_default_str()
      ->type_name("METRIC");
  app.add_option("-f,--format", format, "text: sacreBLEU's line per metric; json: its JSON objects")
      ->check(one_of({"text", "json"}))
      ->capture_default_str();
  app.add_option("-w,--width", width, "decimals of the scores")->check(whole_number(0, 15))->capture_default_str();
  app.add_flag("-b,--score-only", score_only, "print only the scores");
  app.add_flag("-q,--quiet", quiet, "no warnings (empty reference lines, tokenized-looking input)");
  app.add_flag("--no-color", no_color, "accepted for sacreBLEU's sake (also -nc); cmha prints no colours");

  app.add_option("--tokenize", bleu.tokenize, "BLEU's tokenizer (also -tok): 13a (mteval-v13a), intl (mteval-v14), "
                                              "char or none")
      ->check(one_of({"13a", "intl", "char", "none"}))
      ->capture_default_str()
      ->group("BLEU");
  app.add_flag("--lowercase", bleu.lowercase, "BLEU lowercases both sides first (also -lc; signature case:lc)")
      ->group("BLEU");
  app.add_option("-s,--smooth-method", bleu.smooth, "BLEU's smoothing: exp, floor, add-k or none")
      ->check(one_of({"exp", "floor", "add-k", "none"}))
      ->capture_default_str()
      ->group("BLEU");
  app.add_option("--smooth-value", smooth_value, "the value of floor (default 0.1) and add-k (default 1) (also -sv)")
      ->check(CLI::NonNegativeNumber)
      ->type_name("V")
      ->group("BLEU");
  app.add_flag("--force", force, "no warning for hypotheses that look tokenized")->group("BLEU");
  app.add_flag("--compound-split", bleu.compound_split,
               "split hyphenated compounds as ##AT##-##AT## on both sides (the tensor2tensor/fairseq WMT14 "
               "EN-DE convention; not sacreBLEU's; signature tok:13a+compound)")
      ->group("BLEU");

  app.add_option("--chrf-char-order", chrf.char_order, "character n-gram order (also -cc)")
      ->check(whole_number(0, 100))
      ->capture_default_str()
      ->group("chrF");
  app.add_option("--chrf-word-order", chrf.word_order, "word n-gram order (also -cw); 2 is chrF++")
      ->check(whole_number(0, 100))
      ->capture_default_str()
      ->group("chrF");
  app.add_option("--chrf-beta", chrf.beta, "recall weighs beta times as much as precision")
      ->check(whole_number(0, 1000))
      ->capture_default_str()
      ->group("chrF");
  app.add_flag("--chrf-whitespace", chrf.whitespace, "spaces count as characters")->group("chrF");
  app.add_flag("--chrf-lowercase", chrf.lowercase, "chrF lowercases both sides first")->group("chrF");
  app.add_flag("--chrf-eps-smoothing", chrf.eps_smoothing,
               "the mean F-score of all orders with epsilon smoothing (chrF++.py, NLTK, Moses) instead of the "
               "F-score of the orders that occur")
      ->group("chrF");

  app.add_flag("--ter-case-sensitive", ter.case_sensitive, "TER keeps case (by default it lowercases)")
      ->group("TER (defaults as Tercom's)");
  app.add_flag("--ter-normalized", ter.normalized, "Tercom's normalisation: entities decoded, punctuation split off")
      ->group("TER (defaults as Tercom's)");
  app.add_flag("--ter-no-punct", ter.no_punct, "remove the punctuation . , ? : ; ! \" ( )")
      ->group("TER (defaults as Tercom's)");
  app.add_flag("--ter-asian-support", ter.asian_support,
               "with --ter-normalized, CJK characters one word each; with --ter-no-punct, CJK and full-width "
               "punctuation removed too")
      ->group("TER (defaults as Tercom's)");
  bool confidence = false, paired_bs = false, paired_ar = false;
  int confidence_n = eval::kDefaultResamples, paired_bs_n = eval::kDefaultResamples,
      paired_ar_n = eval::kDefaultTrials;
  const char* tests = "Statistical tests (BLEU and chrF; sacreBLEU's seed 12345)";
  app.add_flag("--confidence", confidence, "the bootstrap mean and 95 % interval of one system (also -ci)")
      ->group(tests);
  app.add_option("--confidence-n", confidence_n, "bootstrap resamples of --confidence (also -cin)")
      ->check(whole_number(2, 1000000))
      ->capture_default_str()
      ->group(tests);
  app.add_flag("--paired-bs", paired_bs,
               "paired bootstrap resampling of each system against the first (the baseline) (also -pbs)")
      ->group(tests);
  app.add_option("--paired-bs-n", paired_bs_n, "resamples of --paired-bs (also -pbsn)")
      ->check(whole_number(1, 1000000))
      ->capture_default_str()
      ->group(tests);
  app.add_flag("--paired-ar", paired_ar,
               "paired approximate randomization of each system against the first (also -par)")
      ->group(tests);
  app.add_option("--paired-ar-n", paired_ar_n, "trials of --paired-ar (also -parn)")
      ->check(whole_number(1, 1000000))
      ->capture_default_str()
      ->group(tests);
  if (!cl.parse(args)) return 0;

  const bool paired = paired_bs || paired_ar;
  CMHA_CHECK(!(paired_bs && paired_ar), "--paired-bs and --paired-ar exclude each other: give one");
  CMHA_CHECK(!(confidence && paired),
             "--confidence is for one system; a paired test prints each system's interval itself (--paired-bs)");
  CMHA_CHECK(inputs.size() <= 1 || paired,
             "cmha bleu scores one system unless a paired test is asked for: -i took " +
                 std::to_string(inputs.size()) + " files; add --paired-bs or --paired-ar (the reference files go "
                 "before -i, as in sacreBLEU)");
  CMHA_CHECK(!paired || inputs.size() >= 2,
             std::string("a paired test compares systems with a baseline: give -i BASELINE SYSTEM [SYSTEM ...] "
                         "(got ") + std::to_string(inputs.size()) + " file" + (inputs.size() == 1 ? "" : "s") + ")");
  CMHA_CHECK(!refs.empty(), "cmha bleu needs the reference files: cmha bleu REF [REF ...] -i HYP (see 'cmha bleu --help')");
  CMHA_CHECK(chrf.char_order + chrf.word_order > 0,
             "--chrf-char-order and --chrf-word-order cannot both be 0");
  if (smooth_value >= 0.0) bleu.smooth_value = smooth_value;

  if (paired || confidence) {
    CMHA_CHECK(std::find(metrics.begin(), metrics.end(), "ter") == metrics.end(),
               "cmha bleu's statistical tests cover BLEU and chrF, not TER: drop ter from -m");
    CMHA_CHECK(refs.size() >= 1, "cmha bleu needs the reference files: cmha bleu REF -i BASELINE SYSTEM ...");
  }
  if (paired) return paired_test_command(refs, inputs, metrics, bleu, smooth_value, chrf, paired_bs,
                                         paired_bs ? paired_bs_n : paired_ar_n, format, width);

  const std::string hyp_path = inputs.empty() ? "-" : inputs[0];
  const eval::MetricInput in = eval::read_metric_input(hyp_path, refs);
  CMHA_CHECK(!in.hyps.empty(), (hyp_path == "-" ? std::string("standard input") : "hypothesis file '" + hyp_path + "'") +
                                   " holds no hypotheses: nothing to score");
  if (hyp_path == "-") {
    for (size_t i = 0; i < in.hyps.size(); ++i)
      CMHA_CHECK(in.hyps[i].find('\t') == std::string::npos,
                 "standard input line " + std::to_string(i + 1) +
                     " holds a tab: sacreBLEU reads tab-separated columns on standard input as several systems, "
                     "which cmha bleu does not score; give the file with -i HYP");
  }
  const auto wants = [&](const char* m) { return std::find(metrics.begin(), metrics.end(), m) != metrics.end(); };
  if (!quiet) warn_about_input(in, refs, wants("bleu"), force);

  std::vector<eval::MetricScore> scores;
  const auto with_interval = [&](const eval::ResampledMetric& metric) {
    const eval::TestResult r = eval::confidence_interval(metric, in.hyps, confidence_n);
    eval::MetricScore s = r.score;
    s.confidence_mean = r.mean;
    s.confidence_ci = r.ci;
    return s;
  };
  if (wants("bleu"))
    scores.push_back(confidence ? with_interval(*eval::make_bleu_metric(in.refs, bleu))
                                : eval::corpus_bleu_multi(in.hyps, in.refs, bleu).result());
  if (wants("chrf"))
    scores.push_back(confidence ? with_interval(*eval::make_chrf_metric(in.refs, chrf))
                                : eval::corpus_chrf(in.hyps, in.refs, chrf).result());
  if (wants("ter")) scores.push_back(eval::corpus_ter(in.hyps, in.refs, ter).result());
  const std::string out = format == "json" ? eval::format_results_json(scores, width, score_only)
                                           : eval::format_results_text(scores, width, score_only);
  std::printf("%s\n", out.c_str());
  return 0;
}

}  // namespace cmha::cli
