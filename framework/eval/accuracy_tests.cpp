#include "eval/accuracy_tests.h"

#include <algorithm>
#include <cmath>

#include "eval/numpy_random.h"
#include "tensor/error.h"

namespace cmha::eval {

AccuracyInterval bootstrap_top1(const std::vector<uint8_t>& correct, int resamples, uint64_t seed) {
  CMHA_CHECK(!correct.empty(), "a bootstrap interval of top-1 needs at least one image");
  CMHA_CHECK(resamples > 1, "a bootstrap interval needs at least 2 resamples, got " + std::to_string(resamples));
  const size_t n = correct.size(), r = static_cast<size_t>(resamples);
  AccuracyInterval out;
  out.resamples = resamples;
  int64_t right = 0;
  for (const uint8_t c : correct) right += c != 0;
  out.top1 = 100.0 * static_cast<double>(right) / static_cast<double>(n);
  NumpyGenerator rng(seed);
  std::vector<double> top1s(r);
  // One resample at a time: choice(n, size=(r, n)) draws row after row.
  double sum = 0;
  for (size_t k = 0; k < r; ++k) {
    int64_t hits = 0;
    for (const int64_t i : rng.choice(static_cast<int64_t>(n), n)) hits += correct[static_cast<size_t>(i)] != 0;
    top1s[k] = 100.0 * static_cast<double>(hits) / static_cast<double>(n);
    sum += top1s[k];
  }
  std::sort(top1s.begin(), top1s.end());
  out.mean = sum / static_cast<double>(r);
  out.low = top1s[r / 40];
  out.high = top1s[r - r / 40 - 1];
  return out;
}

McNemarTest mcnemar_exact(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  CMHA_CHECK(a.size() == b.size(), "McNemar's test needs the same images: " + std::to_string(a.size()) + " and " +
                                       std::to_string(b.size()) + " results");
  McNemarTest t;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool x = a[i] != 0, y = b[i] != 0;
    t.both += x && y;
    t.only_a += x && !y;
    t.only_b += !x && y;
    t.neither += !x && !y;
  }
  const int64_t n = t.only_a + t.only_b, k = std::min(t.only_a, t.only_b);
  if (n == 0) return t;  // no image tells them apart: p = 1
  // P(X <= k) for X ~ Binomial(n, 1/2), summed in log space from the largest term down.
  const auto log_term = [n](int64_t j) {
    return std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(j) + 1) -
           std::lgamma(static_cast<double>(n - j) + 1) - static_cast<double>(n) * std::log(2.0);
  };
  const double top = log_term(k);
  double sum = 0;
  for (int64_t j = k; j >= 0; --j) {
    const double term = std::exp(log_term(j) - top);
    sum += term;
    if (term < 1e-18) break;
  }
  t.p_value = std::min(1.0, 2.0 * std::exp(top) * sum);
  return t;
}

}  // namespace cmha::eval
