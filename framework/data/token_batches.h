#pragma once
// Token-budget batching for translation (as fairseq's --max-tokens): pairs
// longer than max_len on either side are dropped once; each epoch shuffles the
// pairs by counter-based keys of (seed, epoch), sorts them by length inside
// windows of shuffle_window batches' worth, packs similar lengths greedily so
// that sentences × max(padded source, padded target) ≤ max_tokens, shuffles
// the batches and deals them round-robin to the ranks (every rank the same
// count). Everything depends only on (seed, epoch, rank, world, lengths),
// never on the thread count.
//
// Sized for WMT14's 4.5 M pairs on every rank of a node: a kept pair costs 8
// bytes (its index and two 16-bit lengths), an epoch's plan 4 bytes a kept pair
// while it is made, and a rank keeps 4 bytes a pair of its own batches only.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/token_cache.h"
#include "tensor/tensor.h"

namespace cmha::data {

struct BatchingOptions {
  int64_t max_tokens = 4096;   // sentences × max(padded source, padded target) per batch
  int64_t max_len = 128;       // longest source or target (as the model sees it) kept; at most 65535
  int64_t shuffle_window = 100;  // batches' worth of pairs sorted together; 0 = the whole epoch
  uint64_t seed = 1;
  int rank = 0, world = 1;
};

// The pair indices of one batch.
using Batch = std::span<const int32_t>;

// Batches in one array of pair indices: batch b is pairs[begins[b], begins[b + 1]).
class PackedBatches {
 public:
  PackedBatches() = default;
  PackedBatches(std::vector<int32_t> pairs, std::vector<int64_t> begins);
  int64_t size() const { return static_cast<int64_t>(begins_.size()) - 1; }
  bool empty() const { return size() == 0; }
  int64_t pairs() const { return static_cast<int64_t>(pairs_.size()); }
  Batch operator[](int64_t b) const {
    return {pairs_.data() + begins_[static_cast<size_t>(b)],
            static_cast<size_t>(begins_[static_cast<size_t>(b) + 1] - begins_[static_cast<size_t>(b)])};
  }
  std::vector<std::vector<int32_t>> to_vectors() const;  // for tests and printing
  bool operator==(const PackedBatches& o) const { return pairs_ == o.pairs_ && begins_ == o.begins_; }

  struct Iterator {  // for range-for over the batches
    const PackedBatches* batches;
    int64_t b;
    Batch operator*() const { return (*batches)[b]; }
    Iterator& operator++() {
      ++b;
      return *this;
    }
    bool operator==(const Iterator& o) const { return b == o.b; }
  };
  Iterator begin() const { return {this, 0}; }
  Iterator end() const { return {this, size()}; }

 private:
  std::vector<int32_t> pairs_;
  std::vector<int64_t> begins_ = {0};
};

// Refuses (one sentence naming `what`) a corpus of 2^31 pairs or more: pair
// indices are 32-bit. WMT14 en-de has 4.5 M, the largest WMT sets a few hundred million.
void check_pair_count(int64_t pairs, const std::string& what);

class TokenBatcher {
 public:
  // Lengths as the model sees them: source ids + eos, target ids + 1 (bos or eos).
  TokenBatcher(const std::vector<int32_t>& src_len, const std::vector<int32_t>& tgt_len,
               const BatchingOptions& options);
  // The same from two token caches (line-aligned), their lengths read in chunks without a copy of them all.
  TokenBatcher(const TokenCache& src, const TokenCache& tgt, const BatchingOptions& options);

  int64_t pairs() const { return pairs_; }
  int64_t kept() const { return static_cast<int64_t>(kept_.size()); }
  int64_t dropped() const { return pairs() - kept(); }
  const BatchingOptions& options() const { return opt_; }

  // This rank's batches of `epoch`, in training order.
  PackedBatches epoch_batches(int64_t epoch) const;
  // Every kept pair, sorted by length and packed, unshuffled and unsharded (validation).
  PackedBatches sorted_batches() const;

 private:
  void check_options() const;
  void keep_if_short(int64_t pair, int32_t src_len, int32_t tgt_len);
  void finish_keeping();
  // Sorts positions [first, last) (into kept_) by padded width, then target and source length; ties keep
  // their order. Appends where each packed batch of the sorted range ends (relative to first) to `ends`.
  void sort_and_pack(uint32_t* first, uint32_t* last, std::vector<int64_t>& ends) const;
  int64_t pairs_ = 0;
  std::vector<uint32_t> kept_;               // kept position → pair index
  std::vector<uint16_t> src_len_, tgt_len_;  // by kept position (≤ max_len ≤ 65535)
  int len_bits_ = 1;                         // bits of the longest kept length
  double width_sum_ = 0;
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
TranslationBatch make_batch(const TokenCache& src, const TokenCache& tgt, Batch idx, int32_t pad, int32_t bos,
                            int32_t eos);

// Keys that order n items for a stream: item i's key depends only on (seed, stream, i): 32 random bits
// above i, so keys are distinct.
std::vector<uint64_t> philox_sort_keys(int64_t n, uint64_t seed, uint64_t stream);
// The order of [0, n) that sorting philox_sort_keys(n, seed, stream) gives, in 4 bytes an item (no 8-byte keys):
// items bucketed by their keys' top bits, each bucket sorted. n < 2^31.
std::vector<uint32_t> philox_order(int64_t n, uint64_t seed, uint64_t stream);

}  // namespace cmha::data
