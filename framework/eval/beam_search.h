#pragma once
// Beam search and greedy decoding over an encoder-decoder transformer, as
// fairseq's SequenceGenerator does it:
//
//   * Several sentences at once; each sentence's `beam` hypotheses are folded
//     into the batch dim (rows s·beam .. s·beam + beam - 1), and a sentence's
//     rows leave the batch as soon as it is finished.
//   * Incremental decoding: one decoder step per output position with a
//     DecoderCache, whose tensors are reordered by the surviving beams' rows
//     after every step (reorder_cache).
//   * Each step ranks the 2·beam best continuations of the live beams by
//     their summed log-probability. An EOS among the first `beam` of them
//     finishes a hypothesis; the best `beam` others continue.
//   * A finished hypothesis scores  Σ log p / len^α  where len counts its
//     tokens including the EOS (fairseq --lenpen α; 0 ranks by raw
//     log-probability, larger α favours longer outputs).
//   * At most  max_len = ⌊a·src_len + b⌋  tokens before the EOS (fairseq
//     --max-len-a/--max-len-b; src_len counts the source tokens including
//     its EOS); at step max_len the EOS is forced.
//   * A sentence is finished when it has `beam` finished hypotheses, or when
//     its `nbest`-th best finished hypothesis scores at least as well as any
//     live beam still could (a live beam's log-probability can only fall, so
//     its best possible score is logp / max_len'^α for α ≥ 0): an early stop
//     that never changes the `nbest` best, only saves steps (the rest of the
//     n-best list is then shorter than fairseq's).
//   * The padding token (and BOS, when it differs from EOS) are never produced.
//
// Beam 1 runs a separate greedy loop (argmax per step), which yields exactly
// what the beam algorithm yields with beam 1.
#include <cstdint>
#include <vector>

#include "nn/transformer.h"

namespace cmha::eval {

struct SearchOptions {
  int64_t beam = 4;          // Vaswani et al. 2017 (WMT14 EN-DE)
  double lenpen = 0.6;       // α; 0.6 as Vaswani et al. and fairseq's WMT recipes (fairseq's default is 1.0)
  double max_len_a = 1.0;    // max output length a·src_len + b: Vaswani et al.'s "input length + 50"
  int64_t max_len_b = 50;    //   (fairseq's defaults are a = 0, b = 200)
  int64_t bos = 2;           // first decoder input
  int64_t eos = 2;           // ends a hypothesis (fairseq starts the decoder with EOS too)
  int64_t pad = 1;           // never produced; -1 = none
  int64_t vocab_limit = 0;   // tokens >= this are never produced; 0 = no limit
  int64_t max_len_cap = 0;   // at most this many output tokens whatever a and b say; 0 = no cap
  int64_t nbest = 1;         // finished hypotheses each sentence is sure to get (1 ≤ nbest ≤ beam)
};

struct Hypothesis {
  std::vector<int64_t> tokens;  // without BOS and EOS
  double logprob = 0.0;         // Σ log p over the tokens and the EOS
  double score = 0.0;           // logprob / (tokens.size() + 1)^lenpen
};

// Each sentence's finished hypotheses, best first: at least one, and opt.nbest
// unless the search ran out of distinct continuations (a tiny vocabulary).
using NBest = std::vector<Hypothesis>;

// fairseq's length-normalised score: logprob / length^alpha.
double length_penalized(double logprob, int64_t length, double alpha);

// ⌊a·src_len + b⌋, at least 0, at most opt.max_len_cap when set (the
// decoder's cache grows with every step: this bounds its memory), and at
// most max_positions - 1 when the model has learned positions (the decoder
// input at step t sits at position t).
int64_t max_output_length(int64_t src_len, const SearchOptions& opt, const nn::TransformerConfig& model);

// What the search needs from a model: the next-token log-probabilities of
// every live row, and a way to follow the rows that survive a step.
class StepScorer {
 public:
  virtual ~StepScorer() = default;
  // prefixes[r]: row r's tokens so far, BOS first (the same length for every
  // row). Returns log-probabilities f32 [rows, V].
  virtual Tensor next_log_probs(const std::vector<std::vector<int64_t>>& prefixes) = 0;
  // Row i of the next step continues row rows[i] of this one. `batch_shrank`:
  // some sentences left, so per-sentence state (encoder output, source mask,
  // cross-attention caches) must follow too; otherwise only rows of the same
  // sentence were permuted, and per-sentence state may stay where it is.
  virtual void select_rows(const std::vector<int64_t>& rows, bool batch_shrank) = 0;
};

// The search algorithms on any scorer; max_lens[s] for each sentence s.
std::vector<NBest> beam_search(StepScorer& scorer, const std::vector<int64_t>& max_lens, const SearchOptions& opt);
std::vector<NBest> greedy_search(StepScorer& scorer, const std::vector<int64_t>& max_lens, const SearchOptions& opt);

// On a transformer (in eval mode): src i64/i32 [B, S], src_pad b8 [B, S] (true =
// padding). Gradient recording is off inside.
std::vector<NBest> beam_search(const nn::Transformer& model, const Tensor& src, const Tensor& src_pad,
                               const SearchOptions& opt);
std::vector<NBest> greedy_search(const nn::Transformer& model, const Tensor& src, const Tensor& src_pad,
                                 const SearchOptions& opt);
// greedy_search when opt.beam == 1, else beam_search.
std::vector<NBest> generate(const nn::Transformer& model, const Tensor& src, const Tensor& src_pad,
                            const SearchOptions& opt);

// Rows of x along dim 0: out[i] = x[rows[i]] (any dtype and shape, CPU; a
// contiguous copy, runs of consecutive rows copied at once).
Tensor select_rows(const Tensor& x, const std::vector<int64_t>& rows);

// Reorders every defined tensor of every AttentionCache of the cache along
// the batch dim (dim 0 for every attention type's layout, including
// collaborative's single key tensor [B, T, D̃k + H]). Static (cross-attention)
// caches only when include_static: their rows are equal within a sentence, so
// a permutation of one sentence's beams leaves them unchanged.
void reorder_cache(nn::DecoderCache& cache, const std::vector<int64_t>& rows, bool include_static = true);

}  // namespace cmha::eval
