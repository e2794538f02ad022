// The tests of significance.h, transcribed from sacreBLEU 2.6.0's
// significance.py and metrics/base.py (corpus_score with n_bootstrap).
#include "eval/significance.h"

#include <algorithm>
#include <cmath>

#include "eval/numpy_random.h"
#include "tensor/error.h"

namespace cmha::eval {

namespace {

using Stats = std::vector<std::vector<int64_t>>;  // [segment][statistic]

class BleuMetric final : public ResampledMetric {
 public:
  BleuMetric(std::vector<std::vector<std::string>> refs, BleuOptions options)
      : refs_(std::move(refs)), options_(std::move(options)) {}
  Stats segment_stats(const std::vector<std::string>& hyps) const override {
    Stats out;
    for (const BleuSegmentStats& s : bleu_segment_stats(hyps, refs_, options_)) out.emplace_back(s.begin(), s.end());
    return out;
  }
  MetricScore score(const std::vector<int64_t>& sums) const override {
    BleuSegmentStats s{};
    std::copy(sums.begin(), sums.end(), s.begin());
    return bleu_from_stats(s, refs_.size(), options_).result();
  }
  double resampled_score(const std::vector<float>& sums) const override {
    std::array<float, kBleuStats> s{};
    std::copy(sums.begin(), sums.end(), s.begin());
    return bleu_resampled_score(s, options_);
  }
  bool float32_scores() const override { return false; }

 private:
  std::vector<std::vector<std::string>> refs_;
  BleuOptions options_;
};

class ChrfMetric final : public ResampledMetric {
 public:
  ChrfMetric(std::vector<std::vector<std::string>> refs, ChrfOptions options)
      : refs_(std::move(refs)), options_(options) {}
  Stats segment_stats(const std::vector<std::string>& hyps) const override {
    return chrf_segment_stats(hyps, refs_, options_);
  }
  MetricScore score(const std::vector<int64_t>& sums) const override {
    return chrf_from_stats(sums, refs_.size(), options_).result();
  }
  double resampled_score(const std::vector<float>& sums) const override {
    return chrf_resampled_score(sums, options_);
  }
  bool float32_scores() const override { return true; }

 private:
  std::vector<std::vector<std::string>> refs_;
  ChrfOptions options_;
};

std::vector<int64_t> column_sums(const Stats& stats) {
  std::vector<int64_t> sums(stats.empty() ? 0 : stats[0].size(), 0);
  for (const auto& row : stats)
    for (size_t k = 0; k < sums.size(); ++k) sums[k] += row[k];
  return sums;
}

// The score of each resample: idxs holds `resamples` rows of n segment
// indices; each row's statistics are summed as float32, in order.
std::vector<double> resampled_scores(const ResampledMetric& metric, const Stats& stats,
                                     const std::vector<int64_t>& idxs, size_t resamples) {
  const size_t n = stats.size(), k = stats.empty() ? 0 : stats[0].size();
  std::vector<double> scores(resamples);
  std::vector<float> sums(k);
  for (size_t r = 0; r < resamples; ++r) {
    std::fill(sums.begin(), sums.end(), 0.0f);
    for (size_t i = 0; i < n; ++i) {
      const auto& row = stats[static_cast<size_t>(idxs[r * n + i])];
      for (size_t j = 0; j < k; ++j) sums[j] += static_cast<float>(row[j]);
    }
    scores[r] = metric.resampled_score(sums);
  }
  return scores;
}

// numpy's pairwise_sum over [begin, begin + n).
template <class T>
T pairwise_sum(const T* a, size_t n) {
  if (n < 8) {
    T res = 0;
    for (size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    T r[8];
    for (size_t j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (size_t j = 0; j < 8; ++j) r[j] += a[i + j];
    T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

// ndarray.mean(): the pairwise sum divided by the count, in the array's precision.
double numpy_mean(const std::vector<double>& values, bool float32) {
  if (float32) return static_cast<float>(numpy_sum(values, true)) / static_cast<float>(values.size());
  return numpy_sum(values, false) / static_cast<double>(values.size());
}

// _compute_p_value: (1 + the statistics above the real one) / (1 + their number).
double p_value(const std::vector<double>& stats, double real_difference, bool float32) {
  size_t above = 0;
  // numpy 2 compares a float32 array with a Python float in float32.
  const double threshold = float32 ? static_cast<float>(real_difference) : real_difference;
  for (const double s : stats) above += s > threshold;
  return static_cast<double>(above + 1) / static_cast<double>(stats.size() + 1);
}

// statistics.mean of doubles: their exact sum (Shewchuk's partials, as
// math.fsum) divided by the count.
double exact_mean(const std::vector<double>& values) {
  std::vector<double> partials;
  for (double x : values) {
    size_t i = 0;
    for (double y : partials) {
      if (std::fabs(x) < std::fabs(y)) std::swap(x, y);
      const double hi = x + y;
      const double lo = y - (hi - x);
      if (lo != 0.0) partials[i++] = lo;
      x = hi;
    }
    partials.resize(i);
    partials.push_back(x);
  }
  double sum = 0.0;
  for (auto it = partials.rbegin(); it != partials.rend(); ++it) sum += *it;
  return sum / static_cast<double>(values.size());
}

void check_systems(const std::vector<std::vector<std::string>>& systems) {
  for (size_t s = 1; s < systems.size(); ++s)
    CMHA_CHECK(systems[s].size() == systems[0].size(),
               "system " + std::to_string(s + 1) + " has " + std::to_string(systems[s].size()) +
                   " segments but the baseline has " + std::to_string(systems[0].size()));
}

}  // namespace

std::unique_ptr<ResampledMetric> make_bleu_metric(const std::vector<std::vector<std::string>>& refs,
                                                  const BleuOptions& options) {
  return std::make_unique<BleuMetric>(refs, options);
}

std::unique_ptr<ResampledMetric> make_chrf_metric(const std::vector<std::vector<std::string>>& refs,
                                                  const ChrfOptions& options) {
  return std::make_unique<ChrfMetric>(refs, options);
}

double numpy_sum(const std::vector<double>& values, bool float32) {
  if (!float32) return pairwise_sum(values.data(), values.size());
  const std::vector<float> f(values.begin(), values.end());
  return pairwise_sum(f.data(), f.size());
}

std::pair<double, double> estimate_ci(std::vector<double> scores, bool float32) {
  CMHA_CHECK(!scores.empty(), "estimate_ci: no resampled scores");
  std::sort(scores.begin(), scores.end());
  const size_t n = scores.size(), lower = n / 40, upper = n - lower - 1;
  const double ci = float32 ? 0.5f * (static_cast<float>(scores[upper]) - static_cast<float>(scores[lower]))
                            : 0.5 * (scores[upper] - scores[lower]);
  return {numpy_mean(scores, float32), ci};
}

TestResult confidence_interval(const ResampledMetric& metric, const std::vector<std::string>& hyps, int resamples,
                               uint64_t seed) {
  CMHA_CHECK(resamples > 1, "the number of bootstrap resamples must be above 1, got " + std::to_string(resamples));
  CMHA_CHECK(!hyps.empty(), "no segments to resample");
  const Stats stats = metric.segment_stats(hyps);
  TestResult result{metric.score(column_sums(stats)), std::nullopt, std::nullopt, std::nullopt};
  NumpyGenerator rng(seed);
  const auto r = static_cast<size_t>(resamples);
  const std::vector<int64_t> idxs = rng.choice(static_cast<int64_t>(hyps.size()), r * hyps.size());
  std::vector<double> scores = resampled_scores(metric, stats, idxs, r);
  // Score.estimate_ci: Python's sorted() and statistics.mean.
  std::sort(scores.begin(), scores.end());
  const size_t lower = r / 40, upper = r - lower - 1;
  const bool f32 = metric.float32_scores();
  result.ci = f32 ? 0.5f * (static_cast<float>(scores[upper]) - static_cast<float>(scores[lower]))
                  : 0.5 * (scores[upper] - scores[lower]);
  const double mean = exact_mean(scores);
  result.mean = f32 ? static_cast<float>(mean) : mean;
  result.score.signature = test_signature(result.score.signature, "bs", resamples, seed);
  return result;
}

std::vector<std::vector<TestResult>> paired_test(const std::vector<const ResampledMetric*>& metrics,
                                                 const std::vector<std::vector<std::string>>& systems,
                                                 bool bootstrap, int samples, uint64_t seed) {
  CMHA_CHECK(systems.size() >= 2, "a paired test needs a baseline and at least one other system");
  CMHA_CHECK(samples > 0, "the number of " + std::string(bootstrap ? "resamples" : "trials") +
                              " must be above 0, got " + std::to_string(samples));
  check_systems(systems);
  const size_t n = systems[0].size(), count = static_cast<size_t>(samples);
  CMHA_CHECK(n > 0, "the systems hold no segments");

  // The draws, shared by every system and metric (each test seeds afresh).
  std::vector<int64_t> idxs;
  std::vector<uint8_t> swap;
  if (bootstrap) {
    idxs = NumpyGenerator(seed).choice(static_cast<int64_t>(n), count * n);
  } else {
    swap = NumpyGenerator(seed).booleans(count * n);
  }

  std::vector<std::vector<TestResult>> results(systems.size());
  for (const ResampledMetric* metric : metrics) {
    const bool f32 = metric->float32_scores();
    const Stats bl_stats = metric->segment_stats(systems[0]);
    const std::vector<int64_t> bl_sums = column_sums(bl_stats);
    TestResult bl{metric->score(bl_sums), std::nullopt, std::nullopt, std::nullopt};
    bl.score.signature = test_signature(bl.score.signature, bootstrap ? "bs" : "ar", samples, seed);
    std::vector<double> bl_scores;
    if (bootstrap) {
      bl_scores = resampled_scores(*metric, bl_stats, idxs, count);
      std::tie(bl.mean, bl.ci) = estimate_ci(bl_scores, f32);
    }
    const std::string signature = bl.score.signature;
    results[0].push_back(bl);

    for (size_t s = 1; s < systems.size(); ++s) {
      const Stats sys_stats = metric->segment_stats(systems[s]);
      const std::vector<int64_t> sys_sums = column_sums(sys_stats);
      TestResult res{metric->score(sys_sums), std::nullopt, std::nullopt, std::nullopt};
      res.score.signature = signature;
      const double diff = std::fabs(bl.score.score - res.score.score);
      std::vector<double> stats(count);
      if (bootstrap) {
        const std::vector<double> sys_scores = resampled_scores(*metric, sys_stats, idxs, count);
        std::tie(res.mean, res.ci) = estimate_ci(sys_scores, f32);
        for (size_t r = 0; r < count; ++r) {
          stats[r] = f32 ? std::fabs(static_cast<float>(sys_scores[r]) - static_cast<float>(bl_scores[r]))
                         : std::fabs(sys_scores[r] - bl_scores[r]);
        }
        const double mean = numpy_mean(stats, f32);
        for (double& v : stats) v = f32 ? static_cast<float>(v) - static_cast<float>(mean) : v - mean;
      } else {
        // Pseudo-system a takes the baseline's segment where the swap is set,
        // b the other system's; their statistics are integers, so a = sys +
        // the swapped differences and b = bl + sys - a.
        const size_t k = bl_sums.size();
        std::vector<int64_t> a(k), b(k);
        for (size_t t = 0; t < count; ++t) {
          a = sys_sums;
          const uint8_t* row = swap.data() + t * n;
          for (size_t i = 0; i < n; ++i)
            if (row[i])
              for (size_t j = 0; j < k; ++j) a[j] += bl_stats[i][j] - sys_stats[i][j];
          for (size_t j = 0; j < k; ++j) b[j] = bl_sums[j] + sys_sums[j] - a[j];
          stats[t] = std::fabs(metric->score(a).score - metric->score(b).score);
        }
      }
      res.p_value = p_value(stats, diff, bootstrap && f32);
      results[s].push_back(res);
    }
  }
  return results;
}

std::string test_signature(const std::string& signature, const std::string& test, int samples, uint64_t seed) {
  const size_t bar = signature.find('|');
  const std::string fields = "|" + test + ":" + std::to_string(samples) + "|seed:" + std::to_string(seed);
  if (bar == std::string::npos) return signature + fields;
  return signature.substr(0, bar) + fields + signature.substr(bar);
}

}  // namespace cmha::eval
