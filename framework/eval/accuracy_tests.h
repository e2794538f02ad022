#pragma once
// Statistics of a classifier's top-1 on a test set: a bootstrap 95 %
// interval (the images resampled with replacement, drawn as sacreBLEU draws
// segments: numpy's default_rng(12345).choice) and the exact McNemar test of
// two classifiers on the same images (a two-sided binomial test on the images
// exactly one of them gets right).
#include <cstdint>
#include <vector>

namespace cmha::eval {

struct AccuracyInterval {
  double top1 = 0;      // percent, on all images
  double mean = 0;      // mean of the resampled top-1s
  double low = 0, high = 0;  // the 2.5th and 97.5th percentile (sorted positions n/40 and n - n/40 - 1)
  int resamples = 0;
};

// `correct` holds one 0/1 per image; at least one image and 2 resamples.
AccuracyInterval bootstrap_top1(const std::vector<uint8_t>& correct, int resamples = 1000, uint64_t seed = 12345);

struct McNemarTest {
  int64_t both = 0, only_a = 0, only_b = 0, neither = 0;  // images each classifier gets right
  double p_value = 1;  // min(1, 2 P(X <= min(only_a, only_b))), X ~ Binomial(only_a + only_b, 1/2)
};

// The two must hold a 0/1 for the same images in the same order.
McNemarTest mcnemar_exact(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b);

}  // namespace cmha::eval
