#pragma once
// chrF (Popović, 2015) and chrF++ (Popović, 2017, word_order = 2) as
// sacreBLEU 2.6.0 computes them (metrics/chrf.py), number for number.
//
// Per segment: optional lowercasing (Python's str.lower); character n-grams
// of orders 1..char_order over the line with its whitespace removed (kept
// with `whitespace`), counted by Unicode code point; for chrF++ word n-grams
// of orders 1..word_order over the whitespace-split words, each word longer
// than one character losing one ASCII punctuation character at its end (or,
// failing that, at its start) as a separate word. Each order gives
// [hypothesis n-grams, reference n-grams, matches]; with several references
// a segment takes the statistics of the reference with the best F-score
// (the first on a tie). The corpus score is the F-beta of the precision and
// recall averaged over the orders that occur on both sides (sacreBLEU's
// default), or with `eps_smoothing` the mean F-beta of all orders.
#include <cstdint>
#include <string>
#include <vector>

#include "eval/metric_score.h"

namespace cmha::eval {

struct ChrfOptions {
  int char_order = 6;         // sacreBLEU --chrf-char-order
  int word_order = 0;         // --chrf-word-order; 2 is chrF++
  int beta = 2;               // --chrf-beta: recall weighs beta times as much as precision
  bool lowercase = false;     // --chrf-lowercase (signature case:lc)
  bool whitespace = false;    // --chrf-whitespace: spaces count as characters
  bool eps_smoothing = false; // --chrf-eps-smoothing (signature eff:no)
};

struct ChrfScore {
  double score = 0.0;  // 0..100
  // Summed over the corpus, three numbers per order (character orders
  // 1..char_order, then word orders 1..word_order): hypothesis n-grams,
  // reference n-grams, matched n-grams.
  std::vector<int64_t> stats;
  std::string name;       // "chrF2", "chrF2++"
  std::string signature;  // "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:..."

  MetricScore result() const { return {name, score, signature, "", std::nullopt, std::nullopt}; }
};

// Corpus chrF of UTF-8 hypotheses against reference streams, each as long as
// `hyps`. Where a reference has no n-grams of an order, the hypothesis's
// n-grams of that order are not counted either (sacreBLEU's rule), so an
// empty reference line adds nothing.
ChrfScore corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& ref_streams,
                      const ChrfOptions& options = {});

// sacreBLEU's statistics of each segment: [hyp, ref, match] per order, from
// the reference with the best F-score. Summed, they give the corpus score.
std::vector<std::vector<int64_t>> chrf_segment_stats(const std::vector<std::string>& hyps,
                                                     const std::vector<std::vector<std::string>>& ref_streams,
                                                     const ChrfOptions& options = {});
// The corpus score of summed statistics, with the signature of `n_refs` references.
ChrfScore chrf_from_stats(const std::vector<int64_t>& sums, size_t n_refs, const ChrfOptions& options = {});
// The score sacreBLEU's bootstrap computes from a resample's statistics,
// summed as float32: under numpy 2 every step of it is float32 arithmetic.
float chrf_resampled_score(const std::vector<float>& sums, const ChrfOptions& options = {});

}  // namespace cmha::eval
