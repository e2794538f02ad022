#include "eval/beam_search.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>

#include "autograd/engine.h"
#include "autograd/ops.h"

namespace cmha::eval {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

void check_options(const SearchOptions& o) {
  CMHA_CHECK(o.beam >= 1, "beam search: the beam size must be at least 1, got " + std::to_string(o.beam));
  CMHA_CHECK(o.nbest >= 1 && o.nbest <= o.beam, "beam search: the n-best list of " + std::to_string(o.nbest) +
                                                     " hypotheses must be between 1 and the beam size " +
                                                     std::to_string(o.beam));
  CMHA_CHECK(o.eos >= 0, "beam search: the EOS id must be set, got " + std::to_string(o.eos));
  CMHA_CHECK(o.bos >= 0, "beam search: the BOS id must be set, got " + std::to_string(o.bos));
  CMHA_CHECK(std::isfinite(o.lenpen), "beam search: the length penalty must be finite");
  CMHA_CHECK(o.vocab_limit == 0 || o.eos < o.vocab_limit,
             "beam search: EOS " + std::to_string(o.eos) + " is outside the vocabulary limit " +
                 std::to_string(o.vocab_limit));
}

// The log-probabilities of one step as a contiguous f32 [rows, V] tensor.
Tensor checked_log_probs(const Tensor& lp, size_t rows) {
  CMHA_CHECK(lp.dim() == 2 && lp.size(0) == static_cast<int64_t>(rows),
             "beam search: the scorer returned " + lp.describe() + " for " + std::to_string(rows) + " rows");
  return lp.to(DType::f32).to(Device::cpu()).contiguous();  // the search itself runs on the host
}

// Whether token v may be produced at step t (length limit and bans applied).
struct TokenFilter {
  const SearchOptions& o;
  bool allowed(int64_t v) const {
    if (v == o.pad) return false;
    if (v == o.bos && o.bos != o.eos) return false;
    return o.vocab_limit == 0 || v < o.vocab_limit;
  }
};

// A candidate continuation: better = higher score, then lower flat index
// (beam · V + token), the order of a stable descending sort.
struct Candidate {
  double score;
  int64_t flat;
  int64_t beam, token;
};
bool better(const Candidate& a, const Candidate& b) {
  return a.score > b.score || (a.score == b.score && a.flat < b.flat);
}

// The best `n` allowed tokens of one row (value desc, token asc), appended to `out`.
void top_tokens(const float* row, int64_t V, const TokenFilter& filter, size_t n, double base, int64_t beam,
                std::vector<Candidate>& out) {
  std::vector<Candidate> best;  // sorted, best first
  best.reserve(n + 1);
  for (int64_t v = 0; v < V; ++v) {
    const float x = row[v];
    if (!(x > -std::numeric_limits<float>::infinity()) || !filter.allowed(v)) continue;  // -inf and NaN
    if (best.size() == n && !(x > best.back().score)) continue;  // ties keep the lower token
    Candidate c{static_cast<double>(x), beam * V + v, beam, v};
    auto at = std::upper_bound(best.begin(), best.end(), c, [](const Candidate& a, const Candidate& b) {
      return a.score > b.score;  // equal values: after the earlier (lower) tokens
    });
    best.insert(at, c);
    if (best.size() > n) best.pop_back();
  }
  for (Candidate& c : best) {
    c.score = base + c.score;
    out.push_back(c);
  }
}

// The best score a live hypothesis with summed log-probability `logprob`
// after `tokens` tokens (no EOS yet) could still reach: its log-probability
// can only fall, and its final length lies in [tokens + 1, max_len + 1].
double best_reachable(double logprob, int64_t tokens, int64_t max_len, double alpha) {
  const int64_t len = alpha >= 0 ? max_len + 1 : tokens + 1;
  return length_penalized(logprob, len, alpha);
}

Hypothesis finish(const std::vector<int64_t>& prefix, double logprob, double alpha) {
  Hypothesis h;
  h.tokens.assign(prefix.begin() + 1, prefix.end());  // drop the BOS
  h.logprob = logprob;
  h.score = length_penalized(logprob, static_cast<int64_t>(h.tokens.size()) + 1, alpha);
  return h;
}

void sort_nbest(std::vector<NBest>& out) {
  for (NBest& n : out)
    std::stable_sort(n.begin(), n.end(), [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
}

// Encoder output and decoder cache of one batch, `width` rows per sentence.
class TransformerScorer : public StepScorer {
 public:
  TransformerScorer(const nn::Transformer& model, const Tensor& src, const Tensor& src_pad, int64_t width)
      : model_(model), cache_(model.new_cache()), device_(model.parameters().front().device()) {
    const int64_t B = src.size(0);
    Tensor memory = model.encode(src.to(device_), src_pad.to(device_));  // [B, S, D]
    if (width == 1) {
      memory_ = memory;
      pad_ = src_pad.to(device_);
    } else {
      std::vector<int64_t> rows;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < width; ++j) rows.push_back(b);
      memory_ = eval::select_rows(memory, rows);
      pad_ = eval::select_rows(src_pad.to(device_), rows);
    }
  }

  Tensor next_log_probs(const std::vector<std::vector<int64_t>>& prefixes) override {
    const int64_t R = static_cast<int64_t>(prefixes.size());
    std::vector<int64_t> last(prefixes.size());
    for (size_t r = 0; r < prefixes.size(); ++r) {
      CMHA_CHECK(static_cast<int64_t>(prefixes[r].size()) == cache_.steps + 1,
                 "beam search: the decoder cache is out of step with the hypotheses");
      last[r] = prefixes[r].back();
    }
    Tensor logits = model_.decode(Tensor::from_vector_i64(last, {R, 1}).to(device_), memory_, pad_, &cache_);  // [R, 1, V]
    return log_softmax(logits.view({R, logits.size(2)}), -1);
  }

  void select_rows(const std::vector<int64_t>& rows, bool batch_shrank) override {
    bool identity = static_cast<int64_t>(rows.size()) == memory_.size(0);
    for (size_t i = 0; identity && i < rows.size(); ++i) identity = rows[i] == static_cast<int64_t>(i);
    if (identity) return;
    reorder_cache(cache_, rows, batch_shrank);
    if (batch_shrank) {
      memory_ = eval::select_rows(memory_, rows);
      pad_ = eval::select_rows(pad_, rows);
    }
  }

 private:
  const nn::Transformer& model_;
  nn::DecoderCache cache_;
  Device device_;  // the model's: every tensor of the step lives there
  Tensor memory_, pad_;
};

std::vector<int64_t> max_lengths(const nn::Transformer& model, const Tensor& src, const Tensor& src_pad,
                                 const SearchOptions& opt) {
  CMHA_CHECK(src.dim() == 2 && src_pad.dim() == 2 && src.shape() == src_pad.shape(),
             "beam search: source " + src.describe() + " and padding mask " + src_pad.describe() +
                 " must both be [batch, length]");
  CMHA_CHECK(src_pad.dtype() == DType::b8, "beam search: the padding mask must be b8, got " + src_pad.describe());
  CMHA_CHECK(!model.is_training(), "beam search needs the model in eval mode (dropout off): call eval() first");
  const int64_t B = src.size(0), S = src.size(1);
  Tensor pad = src_pad.to(Device::cpu()).contiguous();
  const bool* p = pad.data<bool>();
  std::vector<int64_t> out(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    int64_t len = 0;
    for (int64_t s = 0; s < S; ++s) len += p[b * S + s] ? 0 : 1;
    out[b] = max_output_length(len, opt, model.config());
  }
  return out;
}

}  // namespace

double length_penalized(double logprob, int64_t length, double alpha) {
  if (alpha == 0.0) return logprob;
  return logprob / std::pow(static_cast<double>(std::max<int64_t>(length, 1)), alpha);
}

int64_t max_output_length(int64_t src_len, const SearchOptions& opt, const nn::TransformerConfig& model) {
  const double v = std::floor(opt.max_len_a * static_cast<double>(src_len) + static_cast<double>(opt.max_len_b));
  int64_t len = v <= 0 ? 0 : (v > 1e9 ? int64_t{1000000000} : static_cast<int64_t>(v));
  if (opt.max_len_cap > 0) len = std::min(len, opt.max_len_cap);
  if (model.positions == "learned") len = std::min(len, model.max_positions - 1);
  return std::max<int64_t>(len, 0);
}

std::vector<NBest> beam_search(StepScorer& scorer, const std::vector<int64_t>& max_lens, const SearchOptions& opt) {
  check_options(opt);
  const int64_t k = opt.beam;
  const size_t ku = static_cast<size_t>(k);
  struct Beam {
    std::vector<int64_t> prefix;  // BOS first
    double logprob = 0.0;
    bool alive = false;  // false: an unused slot (fewer than k continuations existed)
  };
  struct Sentence {
    size_t id;
    std::vector<Beam> beams;  // k slots, rows id_in_batch·k + j
  };
  std::vector<NBest> out(max_lens.size());
  std::vector<Sentence> active;
  for (size_t i = 0; i < max_lens.size(); ++i) {
    Sentence s{i, std::vector<Beam>(ku)};
    for (size_t j = 0; j < ku; ++j) s.beams[j].prefix = {opt.bos};
    s.beams[0].alive = true;  // the k initial beams are equal: expand one
    active.push_back(std::move(s));
  }
  std::vector<std::vector<int64_t>> prefixes;
  std::vector<Candidate> cands;
  for (int64_t t = 0; !active.empty(); ++t) {
    prefixes.clear();
    for (const Sentence& s : active)
      for (const Beam& b : s.beams) prefixes.push_back(b.prefix);
    const Tensor lp = checked_log_probs(scorer.next_log_probs(prefixes), prefixes.size());
    const int64_t V = lp.size(1);
    CMHA_CHECK(opt.eos < V, "beam search: EOS " + std::to_string(opt.eos) + " is outside the model's vocabulary of " +
                                std::to_string(V));
    const float* p = lp.data<float>();
    const TokenFilter filter{opt};

    std::vector<Sentence> next;
    std::vector<int64_t> rows;
    bool shrank = false;
    for (size_t si = 0; si < active.size(); ++si) {
      Sentence& s = active[si];
      NBest& finished = out[s.id];
      const int64_t max_len = max_lens[s.id];
      cands.clear();
      for (int64_t j = 0; j < k; ++j) {
        const Beam& b = s.beams[j];
        if (!b.alive) continue;
        const float* row = p + (static_cast<int64_t>(si) * k + j) * V;
        if (t >= max_len) {  // the EOS is forced
          const float x = row[opt.eos];
          cands.push_back({b.logprob + (std::isnan(x) ? kNegInf : static_cast<double>(x)), j * V + opt.eos, j, opt.eos});
        } else {
          top_tokens(row, V, filter, 2 * ku, b.logprob, j, cands);
        }
      }
      std::sort(cands.begin(), cands.end(), better);
      if (cands.size() > 2 * ku) cands.resize(2 * ku);

      std::vector<Beam> beams;
      std::vector<int64_t> parents;
      for (size_t c = 0; c < cands.size(); ++c) {
        const Candidate& cand = cands[c];
        const Beam& parent = s.beams[cand.beam];
        if (cand.token == opt.eos) {
          // Only an EOS among the k best candidates finishes a hypothesis.
          if (c < ku && finished.size() < ku) finished.push_back(finish(parent.prefix, cand.score, opt.lenpen));
        } else if (beams.size() < ku) {
          Beam b;
          b.prefix = parent.prefix;
          b.prefix.push_back(cand.token);
          b.logprob = cand.score;
          b.alive = true;
          beams.push_back(std::move(b));
          parents.push_back(cand.beam);
        }
      }
      bool done = finished.size() >= ku || t >= max_len || beams.empty();
      if (!done && finished.size() >= static_cast<size_t>(opt.nbest)) {
        // The nbest-th best finished score: no live beam can still enter the n-best list.
        std::vector<double> scores;
        for (const Hypothesis& h : finished) scores.push_back(h.score);
        std::nth_element(scores.begin(), scores.begin() + (opt.nbest - 1), scores.end(), std::greater<double>());
        const double nth = scores[static_cast<size_t>(opt.nbest - 1)];
        double reachable = kNegInf;
        for (const Beam& b : beams) reachable = std::max(reachable, best_reachable(b.logprob, t + 1, max_len, opt.lenpen));
        done = nth >= reachable;
      }
      if (done) {
        if (finished.empty()) finished.push_back(finish(s.beams[0].prefix, kNegInf, opt.lenpen));  // cannot happen with a sane scorer
        shrank = true;
        continue;
      }
      while (beams.size() < ku) {  // unused slots follow the best beam's row
        Beam b = beams[0];
        b.alive = false;
        b.logprob = kNegInf;
        beams.push_back(std::move(b));
        parents.push_back(parents[0]);
      }
      for (int64_t parent : parents) rows.push_back(static_cast<int64_t>(si) * k + parent);
      next.push_back(Sentence{s.id, std::move(beams)});
    }
    active = std::move(next);
    if (!active.empty()) scorer.select_rows(rows, shrank);
  }
  sort_nbest(out);
  return out;
}

std::vector<NBest> greedy_search(StepScorer& scorer, const std::vector<int64_t>& max_lens, const SearchOptions& opt) {
  check_options(opt);
  CMHA_CHECK(opt.nbest == 1, "greedy search finds one hypothesis per sentence, not an n-best list of " +
                                 std::to_string(opt.nbest) + ": use a beam of at least " + std::to_string(opt.nbest));
  struct Row {
    size_t id;
    std::vector<int64_t> prefix;
    double logprob = 0.0;
  };
  std::vector<NBest> out(max_lens.size());
  std::vector<Row> active;
  for (size_t i = 0; i < max_lens.size(); ++i) active.push_back(Row{i, {opt.bos}, 0.0});
  std::vector<std::vector<int64_t>> prefixes;
  for (int64_t t = 0; !active.empty(); ++t) {
    prefixes.clear();
    for (const Row& r : active) prefixes.push_back(r.prefix);
    const Tensor lp = checked_log_probs(scorer.next_log_probs(prefixes), prefixes.size());
    const int64_t V = lp.size(1);
    CMHA_CHECK(opt.eos < V, "greedy search: EOS " + std::to_string(opt.eos) + " is outside the model's vocabulary of " +
                                std::to_string(V));
    const float* p = lp.data<float>();
    const TokenFilter filter{opt};
    std::vector<Row> next;
    std::vector<int64_t> rows;
    for (size_t ri = 0; ri < active.size(); ++ri) {
      Row& r = active[ri];
      const float* row = p + static_cast<int64_t>(ri) * V;
      int64_t token = opt.eos;
      if (t < max_lens[r.id]) {
        float best = -std::numeric_limits<float>::infinity();
        token = -1;
        for (int64_t v = 0; v < V; ++v)
          if (row[v] > best && filter.allowed(v)) best = row[v], token = v;
        if (token < 0) token = opt.eos;  // every allowed token has probability 0
      }
      const double x = std::isnan(row[token]) ? kNegInf : static_cast<double>(row[token]);
      r.logprob += x;
      if (token == opt.eos) {
        out[r.id].push_back(finish(r.prefix, r.logprob, opt.lenpen));
        continue;
      }
      r.prefix.push_back(token);
      rows.push_back(static_cast<int64_t>(ri));
      next.push_back(std::move(r));
    }
    const bool shrank = next.size() < active.size();
    active = std::move(next);
    if (!active.empty()) scorer.select_rows(rows, shrank);
  }
  return out;
}

std::vector<NBest> beam_search(const nn::Transformer& model, const Tensor& src, const Tensor& src_pad,
                               const SearchOptions& opt) {
  autograd::NoGradGuard no_grad;
  check_options(opt);
  const std::vector<int64_t> max_lens = max_lengths(model, src, src_pad, opt);
  TransformerScorer scorer(model, src, src_pad, opt.beam);
  return beam_search(scorer, max_lens, opt);
}

std::vector<NBest> greedy_search(const nn::Transformer& model, const Tensor& src, const Tensor& src_pad,
                                 const SearchOptions& opt) {
  autograd::NoGradGuard no_grad;
  check_options(opt);
  const std::vector<int64_t> max_lens = max_lengths(model, src, src_pad, opt);
  TransformerScorer scorer(model, src, src_pad, 1);
  return greedy_search(scorer, max_lens, opt);
}

std::vector<NBest> generate(const nn::Transformer& model, const Tensor& src, const Tensor& src_pad,
                            const SearchOptions& opt) {
  return opt.beam == 1 ? greedy_search(model, src, src_pad, opt) : beam_search(model, src, src_pad, opt);
}

Tensor select_rows(const Tensor& x, const std::vector<int64_t>& rows) {
  CMHA_CHECK(x.dim() >= 1, "select_rows: needs at least one dim, got " + x.describe());
  const int64_t n = x.size(0);
  for (int64_t r : rows)
    CMHA_CHECK(r >= 0 && r < n, "select_rows: row " + std::to_string(r) + " is out of range for " + x.describe());
  Tensor src = x.detach().contiguous();
  Shape shape = src.shape();
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor out = Tensor::empty(shape, src.dtype(), src.device());
  if (n == 0 || rows.empty()) return out;
  const size_t row_bytes = src.nbytes() / static_cast<size_t>(n);
  if (row_bytes == 0) return out;
  if (!src.device().is_cpu()) {
    // On a GPU: one device copy per run of consecutive rows (a gather kernel
    // would be one launch; the fused GPU decoder replaces this).
    for (size_t i = 0; i < rows.size();) {
      size_t j = i + 1;
      while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
      const int64_t len = static_cast<int64_t>(j - i);
      Tensor dst = out.narrow(0, static_cast<int64_t>(i), len);
      dst.copy_(src.narrow(0, rows[i], len));
      i = j;
    }
    return out;
  }
  const char* s = static_cast<const char*>(src.raw_data());
  char* d = static_cast<char*>(out.raw_data());
  // Runs of consecutive source rows: one memcpy each.
  std::vector<std::pair<size_t, size_t>> runs;  // (first output row, length)
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
    runs.emplace_back(i, j - i);
    i = j;
  }
  const int64_t nruns = static_cast<int64_t>(runs.size());
#pragma omp parallel for schedule(static) if (out.nbytes() > (size_t{1} << 20) && nruns > 1)
  for (int64_t r = 0; r < nruns; ++r) {
    const auto [first, len] = runs[static_cast<size_t>(r)];
    std::memcpy(d + first * row_bytes, s + static_cast<size_t>(rows[first]) * row_bytes, len * row_bytes);
  }
  return out;
}

void reorder_cache(nn::DecoderCache& cache, const std::vector<int64_t>& rows, bool include_static) {
  autograd::NoGradGuard no_grad;
  auto reorder = [&](std::vector<nn::AttentionCache>& caches) {
    for (nn::AttentionCache& c : caches) {
      if (c.static_kv && !include_static) continue;
      for (Tensor* t : {&c.key, &c.value})
        if (t->defined()) *t = select_rows(*t, rows);
    }
  };
  reorder(cache.self_attn);
  reorder(cache.cross_attn);
}

}  // namespace cmha::eval
