#pragma once
// Token-budget batching for translation (as fairseq's --max-tokens): pairs
// longer than max_len on either side are dropped once; each epoch shuffles the
// pairs by counter-based keys of (seed, epoch), sorts them by length inside
// windows of shuffle_window batches' worth, packs similar lengths greedily so
// that sentences × max(padded source, padded target) ≤ max_tokens, shuffles
// the batches and deals them round-robin to the ranks (every rank the same
// count). Everything depends only on (seed, epoch, rank, world, lengths),
// never on the thread count.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "data/token_cache.h"
#include "tensor/tensor.h"

namespace cmha::data {

struct BatchingOptions {
  int64_t max_tokens = 4096;   // sentences × max(padded source, padded target) per batch
  int64_t max_len = 128;       // longest source or target (as the model sees it) kept
  int64_t shuffle_window = 100;  // batches' worth of pairs sorted together; 0 = the whole epoch
  uint64_t seed = 1;
  int rank = 0, world = 1;
};

using Batch = std::vector<int64_t>;  // pair indices

class TokenBatcher {
 public:
  // Lengths as the model sees them: source ids + eos, target ids + 1 (bos or eos).
  TokenBatcher(std::vector<int32_t> src_len, std::vector<int32_t> tgt_len, const BatchingOptions& options);

  int64_t pairs() const { return static_cast<int64_t>(src_len_.size()); }
  int64_t kept() const { return static_cast<int64_t>(kept_.size()); }
  int64_t dropped() const { return pairs() - kept(); }
  // max(source, target) length of pair i: the padded width it needs.
  int64_t width(int64_t i) const { return std::max(src_len_[i], tgt_len_[i]); }
  const BatchingOptions& options() const { return opt_; }

  // This rank's batches of `epoch`, in training order.
  std::vector<Batch> epoch_batches(int64_t epoch) const;
  // Every kept pair, sorted by length and packed, unshuffled and unsharded (validation).
  std::vector<Batch> sorted_batches() const;
  // Packs `order` (sorted by the caller) greedily under the token budget.
  std::vector<Batch> pack(const std::vector<int64_t>& order) const;

 private:
  void sort_by_length(int64_t* first, int64_t* last) const;
  // pack()'s batches as the positions in [first, last) where each ends.
  void pack_ends(const int64_t* first, const int64_t* last, std::vector<int64_t>& ends) const;
  std::vector<int32_t> src_len_, tgt_len_;
  std::vector<int64_t> kept_;
  BatchingOptions opt_;
  int64_t window_ = 0;  // pairs per sorting window
};

// Tensors of one batch: src [B, S] i64 (ids + eos, padded), src_pad b8 [B, S]
// (true at padding), tgt_in [B, T] = bos + y, tgt_out [B, T] = y + eos,
// padded with `pad`.
struct TranslationBatch {
  Tensor src, src_pad, tgt_in, tgt_out;
  int64_t sentences = 0, src_tokens = 0, tgt_tokens = 0;  // tokens without padding
};
TranslationBatch make_batch(const TokenCache& src, const TokenCache& tgt, const Batch& idx, int32_t pad, int32_t bos,
                            int32_t eos);

// Keys that order n items for a stream: item i's key depends only on (seed, stream, i).
std::vector<uint64_t> philox_sort_keys(int64_t n, uint64_t seed, uint64_t stream);

}  // namespace cmha::data
