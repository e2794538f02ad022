// chrF / chrF++ as sacreBLEU 2.6.0's metrics/chrf.py and metrics/helpers.py
// compute them; the floating-point operations follow Python's order, so
// scores and the best-reference choice agree to the last bit.
#include "eval/chrf.h"

#include <unordered_map>

#include "eval/bleu.h"
#include "tensor/error.h"

namespace cmha::eval {

namespace {

using Counts = std::unordered_map<std::u32string, int64_t>;

// string.punctuation, which chrF++ splits off words.
bool is_ascii_punct(char32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}

// The n-gram counts of one side of a segment: char orders, then word orders.
std::vector<Counts> segment_ngrams(const std::string& line, const ChrfOptions& o) {
  const std::u32string text = detail::decode_utf8(o.lowercase ? unicode_lower(line) : line);
  const std::vector<std::u32string> words = detail::py_split(text);
  std::vector<Counts> out;

  // Characters: the line without whitespace (Python ''.join(line.split())).
  std::u32string chars;
  if (o.whitespace) {
    chars = text;
  } else {
    for (const auto& w : words) chars += w;
  }
  for (int n = 1; n <= o.char_order; ++n) {
    Counts c;
    for (size_t i = 0; i + n <= chars.size(); ++i) ++c[chars.substr(i, n)];
    out.push_back(std::move(c));
  }
  if (o.word_order == 0) return out;

  // Words, with one punctuation character split off an end (chrF++'s
  // _remove_punctuation: '(hi)' becomes '(hi' and ')').
  std::vector<std::u32string> tokens;
  for (const auto& w : words) {
    if (w.size() == 1) {
      tokens.push_back(w);
    } else if (is_ascii_punct(w.back())) {
      tokens.push_back(w.substr(0, w.size() - 1));
      tokens.push_back(w.substr(w.size() - 1));
    } else if (is_ascii_punct(w.front())) {
      tokens.push_back(w.substr(0, 1));
      tokens.push_back(w.substr(1));
    } else {
      tokens.push_back(w);
    }
  }
  for (int n = 1; n <= o.word_order; ++n) {
    Counts c;
    for (size_t i = 0; i + n <= tokens.size(); ++i) {
      std::u32string gram = tokens[i];
      for (int k = 1; k < n; ++k) gram += U' ' + tokens[i + k];
      ++c[gram];
    }
    out.push_back(std::move(c));
  }
  return out;
}

// A number as Python and numpy 2 (NEP 50) compute with it: a Python float
// (double), or a numpy float32. An operation with a float32 operand is done
// in float32, the Python operand (float or int) cast to float32 first.
struct PyNum {
  double v;
  bool f32;
  PyNum(double value, bool is_f32 = false) : v(is_f32 ? static_cast<float>(value) : value), f32(is_f32) {}
  friend PyNum apply(PyNum a, PyNum b, char op) {
    if (a.f32 || b.f32) {
      const auto x = static_cast<float>(a.v), y = static_cast<float>(b.v);
      const float r = op == '+' ? x + y : op == '-' ? x - y : op == '*' ? x * y : x / y;
      return {r, true};
    }
    return {op == '+' ? a.v + b.v : op == '-' ? a.v - b.v : op == '*' ? a.v * b.v : a.v / b.v, false};
  }
  friend PyNum operator+(PyNum a, PyNum b) { return apply(a, b, '+'); }
  friend PyNum operator*(PyNum a, PyNum b) { return apply(a, b, '*'); }
  friend PyNum operator/(PyNum a, PyNum b) { return apply(a, b, '/'); }
  // Comparisons with 0 give the same answer in either precision.
  bool positive() const { return v > 0; }
};

// CHRF._compute_f_score on [hyp, ref, match] per order, as Python computes it
// on Python ints (`f32` false) or on a float32 numpy row (`f32` true: the
// statistics sacreBLEU's bootstrap sums).
template <class Stat>
PyNum f_score_py(const Stat* stats, const ChrfOptions& o, bool f32) {
  const PyNum eps(1e-16);
  const int order = o.char_order + o.word_order;
  const PyNum factor(static_cast<double>(o.beta) * o.beta), one(1.0), hundred(100.0);
  PyNum score(0.0), avg_prec(0.0), avg_rec(0.0);
  int effective_order = 0;
  for (int i = 0; i < order; ++i) {
    const PyNum n_hyp(static_cast<double>(stats[3 * i]), f32);
    const PyNum n_ref(static_cast<double>(stats[3 * i + 1]), f32);
    const PyNum n_match(static_cast<double>(stats[3 * i + 2]), f32);
    const PyNum prec = n_hyp.positive() ? n_match / n_hyp : eps;
    const PyNum rec = n_ref.positive() ? n_match / n_ref : eps;
    const PyNum denom = factor * prec + rec;
    score = score + (denom.positive() ? (one + factor) * prec * rec / denom : eps);
    if (n_hyp.positive() && n_ref.positive()) {
      avg_prec = avg_prec + prec;
      avg_rec = avg_rec + rec;
      ++effective_order;
    }
  }
  if (o.eps_smoothing) return hundred * score / PyNum(order);
  if (effective_order == 0) {
    avg_prec = avg_rec = PyNum(0.0);
  } else {
    avg_prec = avg_prec / PyNum(effective_order);
    avg_rec = avg_rec / PyNum(effective_order);
  }
  if ((avg_prec + avg_rec).v == 0.0) return PyNum(0.0);
  score = (one + factor) * avg_prec * avg_rec;
  score = score / (factor * avg_prec + avg_rec);
  return hundred * score;
}

double f_score(const std::vector<int64_t>& stats, const ChrfOptions& o) {
  return f_score_py(stats.data(), o, false).v;
}

}  // namespace

std::vector<std::vector<int64_t>> chrf_segment_stats(const std::vector<std::string>& hyps,
                                                     const std::vector<std::vector<std::string>>& ref_streams,
                                                     const ChrfOptions& options) {
  CMHA_CHECK(options.char_order >= 0 && options.word_order >= 0 && options.char_order + options.word_order > 0,
             "chrF needs a character or word n-gram order above 0 (got " + std::to_string(options.char_order) +
                 " and " + std::to_string(options.word_order) + ")");
  CMHA_CHECK(options.beta >= 0, "chrF: beta must be >= 0, got " + std::to_string(options.beta));
  CMHA_CHECK(!ref_streams.empty(), "chrF needs at least one reference stream");
  for (size_t r = 0; r < ref_streams.size(); ++r)
    CMHA_CHECK(ref_streams[r].size() == hyps.size(),
               "chrF: " + std::to_string(hyps.size()) + " hypotheses but reference stream " + std::to_string(r + 1) +
                   " has " + std::to_string(ref_streams[r].size()) + " segments");
  const size_t orders = static_cast<size_t>(options.char_order + options.word_order);

  std::vector<std::vector<int64_t>> out(hyps.size());
  for (size_t i = 0; i < hyps.size(); ++i) {
    CMHA_CHECK(detail::find_invalid_utf8(hyps[i]) == std::string_view::npos,
               "chrF: hypothesis segment " + std::to_string(i + 1) + " is not valid UTF-8");
    for (size_t r = 0; r < ref_streams.size(); ++r)
      CMHA_CHECK(detail::find_invalid_utf8(ref_streams[r][i]) == std::string_view::npos,
                 "chrF: segment " + std::to_string(i + 1) + " of reference stream " + std::to_string(r + 1) +
                     " is not valid UTF-8");
    const std::vector<Counts> hyp = segment_ngrams(hyps[i], options);
    std::vector<int64_t> best;
    double best_f = -1.0;
    for (const auto& stream : ref_streams) {
      const std::vector<Counts> ref = segment_ngrams(stream[i], options);
      std::vector<int64_t> stats;
      stats.reserve(3 * orders);
      for (size_t n = 0; n < orders; ++n) {
        int64_t hyp_count = 0, ref_count = 0, match = 0;
        for (const auto& [gram, count] : hyp[n]) {
          hyp_count += count;
          const auto it = ref[n].find(gram);
          if (it != ref[n].end()) match += std::min(count, it->second);
        }
        for (const auto& kv : ref[n]) ref_count += kv.second;
        // No reference n-grams of this order: the hypothesis's are not counted.
        stats.insert(stats.end(), {ref[n].empty() ? 0 : hyp_count, ref_count, match});
      }
      const double f = f_score(stats, options);
      if (f > best_f) {
        best_f = f;
        best = std::move(stats);
      }
    }
    out[i] = std::move(best);
  }
  return out;
}

ChrfScore chrf_from_stats(const std::vector<int64_t>& sums, size_t n_refs, const ChrfOptions& options) {
  ChrfScore s;
  s.stats = sums;
  s.score = f_score(s.stats, options);
  s.name = "chrF" + std::to_string(options.beta) + std::string(static_cast<size_t>(options.word_order), '+');
  s.signature = make_signature({{"nrefs", std::to_string(n_refs)},
                                {"case", options.lowercase ? "lc" : "mixed"},
                                {"eff", options.eps_smoothing ? "no" : "yes"},
                                {"nc", std::to_string(options.char_order)},
                                {"nw", std::to_string(options.word_order)},
                                {"space", options.whitespace ? "yes" : "no"}});
  return s;
}

float chrf_resampled_score(const std::vector<float>& sums, const ChrfOptions& options) {
  return static_cast<float>(f_score_py(sums.data(), options, true).v);
}

ChrfScore corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& ref_streams,
                      const ChrfOptions& options) {
  std::vector<int64_t> sums(3 * static_cast<size_t>(std::max(0, options.char_order + options.word_order)), 0);
  for (const std::vector<int64_t>& s : chrf_segment_stats(hyps, ref_streams, options))
    for (size_t k = 0; k < sums.size(); ++k) sums[k] += s[k];
  return chrf_from_stats(sums, ref_streams.size(), options);
}

}  // namespace cmha::eval
