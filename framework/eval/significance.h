#pragma once
// sacreBLEU 2.6.0's statistical tests (significance.py), number for number:
// the bootstrap 95 % confidence interval of one system (--confidence), the
// paired bootstrap resampling test (--paired-bs, Koehn 2004) and the paired
// approximate randomisation test (--paired-ar, Riezler and Maxwell 2005) of
// systems against a baseline, on BLEU and chrF.
//
// Both draw from numpy's default_rng(seed) (numpy_random.h): the bootstrap
// takes choice(n, (resamples, n)) segment indices once and uses them for
// every system and metric; AR takes integers(2, (trials, n), bool) swaps. A
// resample's statistics are summed as float32 (as sacreBLEU does), so its
// BLEU precisions and its whole chrF are float32 arithmetic (numpy 2).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "eval/bleu.h"
#include "eval/chrf.h"
#include "eval/metric_score.h"

namespace cmha::eval {

inline constexpr uint64_t kSacrebleuSeed = 12345;
inline constexpr int kDefaultResamples = 1000;  // --paired-bs-n, --confidence-n
inline constexpr int kDefaultTrials = 10000;    // --paired-ar-n

// One corpus metric as the tests need it: each segment's statistics, the
// score of their sum, and the score of a resample's float32 sum.
class ResampledMetric {
 public:
  virtual ~ResampledMetric() = default;
  // The segment statistics of one system against the metric's references.
  virtual std::vector<std::vector<int64_t>> segment_stats(const std::vector<std::string>& hyps) const = 0;
  // The score of summed statistics, with its name and signature.
  virtual MetricScore score(const std::vector<int64_t>& sums) const = 0;
  // The score of a resample's statistics summed as float32.
  virtual double resampled_score(const std::vector<float>& sums) const = 0;
  // Whether numpy holds the resampled scores as float32 (chrF) or float64 (BLEU).
  virtual bool float32_scores() const = 0;
};

std::unique_ptr<ResampledMetric> make_bleu_metric(const std::vector<std::vector<std::string>>& refs,
                                                  const BleuOptions& options);
std::unique_ptr<ResampledMetric> make_chrf_metric(const std::vector<std::vector<std::string>>& refs,
                                                  const ChrfOptions& options);

// What sacreBLEU's Result holds for one system and metric.
struct TestResult {
  MetricScore score;              // the system's score on the whole corpus
  std::optional<double> p_value;  // against the baseline (absent for the baseline)
  std::optional<double> mean;     // bootstrap estimate of the true mean
  std::optional<double> ci;       // half-width of the 95 % interval around it
};

// estimate_ci: the mean of the resampled scores and half the distance between
// the 2.5th and 97.5th percentile (sorted positions n/40 and n - n/40 - 1),
// in float32 when the scores are.
std::pair<double, double> estimate_ci(std::vector<double> scores, bool float32);

// --confidence: the score and bootstrap interval of one system
// (Metric.corpus_score with n_bootstrap; the mean exact, as statistics.mean).
TestResult confidence_interval(const ResampledMetric& metric, const std::vector<std::string>& hyps,
                               int resamples = kDefaultResamples, uint64_t seed = kSacrebleuSeed);

// --paired-bs / --paired-ar: results[system][metric], system 0 the baseline.
// For "bs" every system gets its mean and interval; for "ar" none does.
std::vector<std::vector<TestResult>> paired_test(const std::vector<const ResampledMetric*>& metrics,
                                                 const std::vector<std::vector<std::string>>& systems,
                                                 bool bootstrap, int samples, uint64_t seed = kSacrebleuSeed);

// The signature with sacreBLEU's test fields after nrefs:
// "nrefs:1|bs:1000|seed:12345|case:mixed|..." (or "ar:10000|seed:12345").
std::string test_signature(const std::string& signature, const std::string& test, int samples, uint64_t seed);

// numpy's pairwise summation (add.reduce of a contiguous array), in float32
// or float64.
double numpy_sum(const std::vector<double>& values, bool float32);

}  // namespace cmha::eval
