// TER's edit search as sacreBLEU 2.6.0's metrics/lib_ter.py runs it: the
// same beam edit distance, the same shift candidates in the same order with
// the same ranking and limits, so every segment gets the same edit count.
// (sacreBLEU caches rows of the edit-distance matrix by hypothesis prefix;
// every hypothesis of one segment has the same length, so a cached row
// equals a recomputed one and the cache changes nothing but speed.)
#include "eval/ter.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <unordered_map>

#include "eval/bleu.h"
#include "tensor/error.h"

namespace cmha::eval {

namespace {

constexpr int kMaxShiftSize = 10;
constexpr int kMaxShiftDist = 50;
constexpr int kBeamWidth = 25;
constexpr int kMaxShiftCandidates = 1000;
constexpr int64_t kInfinity = 10000000000000000;  // int(1e16)

// Edit operations, as lib_ter.py spells them.
constexpr char kIns = 'i', kDel = 'd', kNop = ' ', kSub = 's', kUndef = 'x';

using Words = std::vector<int>;  // words as ids: equal words, equal ids

struct Cell {
  int64_t cost;
  char op;
};

// BeamEditDistance: Levenshtein distance of a hypothesis to the reference
// over a band around the (length-ratio) diagonal, with Tercom's preference
// among equal costs, and the trace of operations.
class BeamEditDistance {
 public:
  explicit BeamEditDistance(const Words& ref) : ref_(ref) {}

  // Returns the distance; with `trace`, also the operations from start to end.
  int64_t operator()(const Words& hyp, std::string* trace = nullptr) {
    const size_t n_h = hyp.size(), n_r = ref_.size();
    dist_.assign((n_h + 1) * (n_r + 1), Cell{kInfinity, kUndef});
    auto at = [&](size_t i, size_t j) -> Cell& { return dist_[i * (n_r + 1) + j]; };
    for (size_t j = 0; j <= n_r; ++j) at(0, j) = {static_cast<int64_t>(j), kIns};

    const double length_ratio = n_h > 0 ? static_cast<double>(n_r) / static_cast<double>(n_h) : 1.0;
    // Very unequal lengths: widen the beam so that consecutive rows overlap.
    const int64_t beam = kBeamWidth < length_ratio / 2 ? static_cast<int64_t>(std::ceil(length_ratio / 2 + kBeamWidth))
                                                       : kBeamWidth;
    for (size_t i = 1; i <= n_h; ++i) {
      const auto pseudo_diag = static_cast<int64_t>(std::floor(static_cast<double>(i) * length_ratio));
      const int64_t min_j = std::max<int64_t>(0, pseudo_diag - beam);
      int64_t max_j = std::min<int64_t>(static_cast<int64_t>(n_r) + 1, pseudo_diag + beam);
      if (i == n_h) max_j = static_cast<int64_t>(n_r) + 1;
      for (int64_t jj = min_j; jj < max_j; ++jj) {
        const auto j = static_cast<size_t>(jj);
        if (j == 0) {
          at(i, 0) = {at(i - 1, 0).cost + 1, kDel};
          continue;
        }
        const bool same = hyp[i - 1] == ref_[j - 1];
        // Tercom prefers no-op/substitution, then insertion, then deletion;
        // the trace is flipped later, so deletion comes before insertion here.
        const Cell ops[3] = {{at(i - 1, j - 1).cost + (same ? 0 : 1), same ? kNop : kSub},
                             {at(i - 1, j).cost + 1, kDel},
                             {at(i, j - 1).cost + 1, kIns}};
        Cell& cell = at(i, j);
        for (const Cell& op : ops)
          if (cell.cost > op.cost) cell = op;
      }
    }
    if (trace) {
      trace->clear();
      size_t i = n_h, j = n_r;
      while (i > 0 || j > 0) {
        const char op = at(i, j).op;
        trace->push_back(op);
        if (op == kSub || op == kNop) {
          --i;
          --j;
        } else if (op == kIns) {
          --j;
        } else if (op == kDel) {
          --i;
        } else {
          throw Error("TER: the edit-distance beam lost its path (an unreachable cell)");
        }
      }
      std::reverse(trace->begin(), trace->end());
    }
    return at(n_h, n_r).cost;
  }

 private:
  const Words& ref_;
  std::vector<Cell> dist_;  // (n_h + 1) x (n_r + 1), row-major
};

// Python's words[a:b] with its clamping.
void append_slice(Words& out, const Words& w, int64_t a, int64_t b) {
  const auto n = static_cast<int64_t>(w.size());
  a = std::clamp<int64_t>(a, 0, n);
  b = std::clamp<int64_t>(b, 0, n);
  if (a < b) out.insert(out.end(), w.begin() + a, w.begin() + b);
}

// _perform_shift: the block words[start:start+length] moved before `target`.
Words perform_shift(const Words& w, int64_t start, int64_t length, int64_t target) {
  Words out;
  out.reserve(w.size());
  const auto n = static_cast<int64_t>(w.size());
  if (target < start) {
    append_slice(out, w, 0, target);
    append_slice(out, w, start, start + length);
    append_slice(out, w, target, start);
    append_slice(out, w, start + length, n);
  } else if (target > start + length) {
    append_slice(out, w, 0, start);
    append_slice(out, w, start + length, target);
    append_slice(out, w, start, start + length);
    append_slice(out, w, target, n);
  } else {
    append_slice(out, w, 0, start);
    append_slice(out, w, start + length, length + target);
    append_slice(out, w, start, start + length);
    append_slice(out, w, length + target, n);
  }
  return out;
}

struct ShiftResult {
  int64_t delta = 0;  // edits saved by the best shift
  Words words;        // the hypothesis after it
};

// _shift: the best single block shift of `hyp`, by (edits saved, block
// length, earliest start, earliest target). `checked` counts candidates over
// the whole segment.
ShiftResult best_shift(const Words& hyp, const Words& ref, BeamEditDistance& ed, int& checked) {
  std::string trace;
  const int64_t pre_score = ed(hyp, &trace);
  // The alignment of the flipped trace (rewriting the reference into the
  // hypothesis): ref position -> hyp position, and which positions are wrong.
  std::vector<int64_t> align(ref.size(), 0);
  std::vector<int> ref_err, hyp_err;
  int64_t pos_hyp = -1, pos_ref = -1;
  for (const char inv_op : trace) {
    const char op = inv_op == kIns ? kDel : inv_op == kDel ? kIns : inv_op;
    if (op == kNop || op == kSub) {
      align[static_cast<size_t>(++pos_ref)] = ++pos_hyp;
      hyp_err.push_back(op == kSub);
      ref_err.push_back(op == kSub);
    } else if (op == kIns) {
      ++pos_hyp;
      hyp_err.push_back(1);
    } else {
      align[static_cast<size_t>(++pos_ref)] = pos_hyp;
      ref_err.push_back(1);
    }
  }
  auto any_error = [](const std::vector<int>& err, int64_t from, int64_t length) {
    for (int64_t k = from; k < from + length && k < static_cast<int64_t>(err.size()); ++k)
      if (err[static_cast<size_t>(k)]) return true;
    return false;
  };

  bool found = false;
  std::tuple<int64_t, int64_t, int64_t, int64_t> best;  // (delta, length, -start_h, -idx)
  Words best_words;
  const auto n_h = static_cast<int64_t>(hyp.size()), n_r = static_cast<int64_t>(ref.size());
  // _find_shifted_pairs: every (start_h, start_r, length) with equal blocks.
  for (int64_t start_h = 0; start_h < n_h; ++start_h) {
    for (int64_t start_r = 0; start_r < n_r; ++start_r) {
      if (std::abs(start_r - start_h) > kMaxShiftDist) continue;
      for (int64_t length = 1; length <= kMaxShiftSize; ++length) {
        if (hyp[static_cast<size_t>(start_h + length - 1)] != ref[static_cast<size_t>(start_r + length - 1)]) break;
        // Only shift a block that is wrong where it is and wrong where it goes.
        const bool worth = any_error(hyp_err, start_h, length) && any_error(ref_err, start_r, length) &&
                           !(start_h <= align[static_cast<size_t>(start_r)] &&
                             align[static_cast<size_t>(start_r)] < start_h + length);
        if (worth) {
          int64_t prev_idx = -1;
          for (int64_t offset = -1; offset < length; ++offset) {
            // sacreBLEU inserts before the index (Tercom after it).
            const int64_t idx = start_r + offset == -1 ? 0 : align[static_cast<size_t>(start_r + offset)] + 1;
            if (idx == prev_idx) continue;
            prev_idx = idx;
            Words shifted = perform_shift(hyp, start_h, length, idx);
            const auto candidate = std::make_tuple(pre_score - ed(shifted), length, -start_h, -idx);
            ++checked;
            if (!found || candidate > best) {
              found = true;
              best = candidate;
              best_words = std::move(shifted);
            }
          }
          if (checked >= kMaxShiftCandidates) goto done;
        }
        // One sequence consumed: no longer blocks from here.
        if (n_h == start_h + length || n_r == start_r + length) break;
      }
    }
  }
done:
  if (!found) return {0, hyp};
  return {std::get<0>(best), std::move(best_words)};
}

// translation_edit_rate: shifts while they save edits, then the distance.
int64_t edits_of(const Words& hyp, const Words& ref) {
  if (ref.empty()) return static_cast<int64_t>(hyp.size());
  BeamEditDistance ed(ref);
  int64_t shifts = 0;
  int checked = 0;
  Words input = hyp;
  while (true) {
    ShiftResult r = best_shift(input, ref, ed, checked);
    // At the candidate limit the search stops, this round's shift unused.
    if (checked >= kMaxShiftCandidates || r.delta <= 0) break;
    ++shifts;
    input = std::move(r.words);
  }
  return shifts + ed(input);
}

// Words of tokenized lines as ids shared by one segment's sides.
class WordIds {
 public:
  Words operator()(const std::string& tokenized) {
    Words out;
    for (const auto& w : detail::py_split(detail::decode_utf8(tokenized)))
      out.push_back(ids_.emplace(w, static_cast<int>(ids_.size())).first->second);
    return out;
  }

 private:
  std::unordered_map<std::u32string, int> ids_;
};

}  // namespace

int64_t ter_edits(const std::vector<std::string>& hyp, const std::vector<std::string>& ref) {
  std::unordered_map<std::string, int> ids;
  auto to_ids = [&](const std::vector<std::string>& words) {
    Words out;
    for (const auto& w : words) out.push_back(ids.emplace(w, static_cast<int>(ids.size())).first->second);
    return out;
  };
  const Words h = to_ids(hyp);
  return edits_of(h, to_ids(ref));
}

TerScore corpus_ter(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& ref_streams,
                    const TerOptions& options) {
  CMHA_CHECK(!ref_streams.empty(), "TER needs at least one reference stream");
  for (size_t r = 0; r < ref_streams.size(); ++r)
    CMHA_CHECK(ref_streams[r].size() == hyps.size(),
               "TER: " + std::to_string(hyps.size()) + " hypotheses but reference stream " + std::to_string(r + 1) +
                   " has " + std::to_string(ref_streams[r].size()) + " segments");
  TerScore s;
  for (size_t i = 0; i < hyps.size(); ++i) {
    CMHA_CHECK(detail::find_invalid_utf8(hyps[i]) == std::string_view::npos,
               "TER: hypothesis segment " + std::to_string(i + 1) + " is not valid UTF-8");
    for (size_t r = 0; r < ref_streams.size(); ++r)
      CMHA_CHECK(detail::find_invalid_utf8(ref_streams[r][i]) == std::string_view::npos,
                 "TER: segment " + std::to_string(i + 1) + " of reference stream " + std::to_string(r + 1) +
                     " is not valid UTF-8");
    WordIds ids;
    const Words hyp = ids(ter_tokenize(hyps[i], options));
    int64_t best = kInfinity, ref_lengths = 0;
    for (const auto& stream : ref_streams) {
      // sacreBLEU tokenizes a reference twice (TER._cache_references, then
      // _extract_reference_info): it matters with --ter-normalized, where
      // "mary's ." becomes "mary 's ." only the second time.
      const Words ref = ids(ter_tokenize(ter_tokenize(stream[i], options), options));
      best = std::min(best, edits_of(hyp, ref));
      ref_lengths += static_cast<int64_t>(ref.size());
    }
    s.num_edits += best;
    s.ref_length += static_cast<double>(ref_lengths) / static_cast<double>(ref_streams.size());
  }
  const double rate = s.ref_length > 0 ? static_cast<double>(s.num_edits) / s.ref_length : s.num_edits > 0 ? 1.0 : 0.0;
  s.score = 100 * rate;
  s.signature = make_signature({{"nrefs", std::to_string(ref_streams.size())},
                                {"case", options.case_sensitive ? "mixed" : "lc"},
                                {"tok", "tercom"},
                                {"norm", options.normalized ? "yes" : "no"},
                                {"punct", options.no_punct ? "no" : "yes"},
                                {"asian", options.asian_support ? "yes" : "no"}});
  return s;
}

}  // namespace cmha::eval
