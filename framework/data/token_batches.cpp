#include "data/token_batches.h"

#include <array>
#include <bit>
#include <climits>
#include <numeric>
#include <utility>

#include "tensor/error.h"
#include "tensor/rng.h"

namespace cmha::data {

namespace {

// The Philox key of the sort keys of (seed, stream).
std::array<uint32_t, 2> sort_key_key(uint64_t seed, uint64_t stream) {
  return Generator(seed * 1000003ull + stream * 0x9E3779B97F4A7C15ull + 0x42ull).key();
}

// Item i's 32 random bits: the high half of its sort key.
uint32_t random_bits(uint64_t i, const std::array<uint32_t, 2>& key) { return philox_block(i >> 2, key)[i & 3]; }

constexpr int64_t kLengthChunk = int64_t{1} << 16;  // lengths read from a token cache at a time

// Greedy packing of a length-sorted sequence of n pairs, pair k of source and target length length(k) (a
// pair of ints): appends the position where each batch ends.
template <class Lengths>
void pack_ends(int64_t n, Lengths length, int64_t max_tokens, std::vector<int64_t>& ends) {
  int64_t max_s = 0, max_t = 0, size = 0;
  for (int64_t k = 0; k < n; ++k) {
    const auto [ls, lt] = length(k);
    const int64_t s = std::max<int64_t>(max_s, ls), t = std::max<int64_t>(max_t, lt);
    if (size > 0 && (size + 1) * std::max(s, t) > max_tokens) {
      ends.push_back(k);
      size = 0;
      max_s = ls;
      max_t = lt;
    } else {
      max_s = s;
      max_t = t;
    }
    ++size;
  }
  if (size > 0) ends.push_back(n);
}

}  // namespace

std::vector<uint64_t> philox_sort_keys(int64_t n, uint64_t seed, uint64_t stream) {
  const std::array<uint32_t, 2> key = sort_key_key(seed, stream);
  std::vector<uint64_t> keys(static_cast<size_t>(n));
  for (int64_t c = 0; c * 4 < n; ++c) {
    const auto r = philox_block(static_cast<uint64_t>(c), key);
    for (int64_t k = 0; k < 4 && c * 4 + k < n; ++k) {
      const int64_t i = c * 4 + k;
      // 32 random bits above the index: distinct keys, so any sort gives one order.
      keys[i] = (static_cast<uint64_t>(r[k]) << 32) | static_cast<uint32_t>(i);
    }
  }
  return keys;
}

std::vector<uint32_t> philox_order(int64_t n, uint64_t seed, uint64_t stream) {
  check_pair_count(n, "philox_order");
  const std::array<uint32_t, 2> key = sort_key_key(seed, stream);
  // Buckets by the keys' top `bits` bits (uniform: about 8 to 16 items a bucket); bucket b is
  // order[start[b], start[b + 1]).
  const int bits = std::clamp(static_cast<int>(std::bit_width(static_cast<uint64_t>(n))) - 4, 0, 20);
  const int shift = 32 - bits;
  std::vector<uint32_t> start((size_t{1} << bits) + 1, 0);
  for (int64_t c = 0; c * 4 < n; ++c) {
    const auto r = philox_block(static_cast<uint64_t>(c), key);
    for (int64_t k = 0; k < 4 && c * 4 + k < n; ++k) ++start[(static_cast<uint64_t>(r[k]) >> shift) + 1];
  }
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<uint32_t> order(static_cast<size_t>(n));
  {
    std::vector<uint32_t> next(start.begin(), start.end() - 1);
    for (int64_t c = 0; c * 4 < n; ++c) {
      const auto r = philox_block(static_cast<uint64_t>(c), key);
      for (int64_t k = 0; k < 4 && c * 4 + k < n; ++k)
        order[next[static_cast<uint64_t>(r[k]) >> shift]++] = static_cast<uint32_t>(c * 4 + k);
    }
  }
  // Each bucket sorted by the whole key (its random bits recomputed, then the index).
  std::vector<uint64_t> keys;
  for (size_t b = 0; b + 1 < start.size(); ++b) {
    if (start[b + 1] - start[b] < 2) continue;
    keys.clear();
    for (uint32_t j = start[b]; j < start[b + 1]; ++j)
      keys.push_back((static_cast<uint64_t>(random_bits(order[j], key)) << 32) | order[j]);
    std::sort(keys.begin(), keys.end());
    for (size_t k = 0; k < keys.size(); ++k) order[start[b] + k] = static_cast<uint32_t>(keys[k]);
  }
  return order;
}

void check_pair_count(int64_t pairs, const std::string& what) {
  CMHA_CHECK(pairs >= 0 && pairs < (int64_t{1} << 31),
             what + ": " + std::to_string(pairs) +
                 " pairs is more than the 2^31 - 1 that batching indexes with 32 bits; split the corpus");
}

PackedBatches::PackedBatches(std::vector<int32_t> pairs, std::vector<int64_t> begins)
    : pairs_(std::move(pairs)), begins_(std::move(begins)) {
  CMHA_CHECK(!begins_.empty() && begins_.front() == 0 && begins_.back() == static_cast<int64_t>(pairs_.size()) &&
                 std::is_sorted(begins_.begin(), begins_.end()),
             "PackedBatches: the batch begins do not cover the pairs in order");
}

std::vector<std::vector<int32_t>> PackedBatches::to_vectors() const {
  std::vector<std::vector<int32_t>> out;
  for (const Batch b : *this) out.emplace_back(b.begin(), b.end());
  return out;
}

void TokenBatcher::check_options() const {
  const BatchingOptions& o = opt_;
  CMHA_CHECK(o.max_tokens >= 1 && o.max_len >= 1 && o.max_len <= o.max_tokens,
             "data.max_len (" + std::to_string(o.max_len) + ") must be at most data.max_tokens (" +
                 std::to_string(o.max_tokens) + "): a pair that long could not fit in any batch");
  CMHA_CHECK(o.max_len <= 65535, "data.max_len (" + std::to_string(o.max_len) +
                                     ") must be at most 65535 tokens (the batcher keeps 16-bit lengths)");
  CMHA_CHECK(o.world >= 1 && o.rank >= 0 && o.rank < o.world,
             "rank " + std::to_string(o.rank) + " is outside a world of " + std::to_string(o.world));
  CMHA_CHECK(o.shuffle_window >= 0, "data.shuffle_window must not be negative");
}

void TokenBatcher::keep_if_short(int64_t pair, int32_t src_len, int32_t tgt_len) {
  if (src_len > opt_.max_len || tgt_len > opt_.max_len) return;
  kept_.push_back(static_cast<uint32_t>(pair));
  src_len_.push_back(static_cast<uint16_t>(src_len));
  tgt_len_.push_back(static_cast<uint16_t>(tgt_len));
  const int32_t width = std::max(src_len, tgt_len);
  width_sum_ += width;
  len_bits_ = std::max(len_bits_, static_cast<int>(std::bit_width(static_cast<uint32_t>(width))));
}

void TokenBatcher::finish_keeping() {
  if (kept_.capacity() > kept_.size() + kept_.size() / 8) {  // many dropped: give the reserve back
    kept_.shrink_to_fit();
    src_len_.shrink_to_fit();
    tgt_len_.shrink_to_fit();
  }
  const double mean_width = kept_.empty() ? 1.0 : width_sum_ / static_cast<double>(kept_.size());
  window_ = opt_.shuffle_window == 0
                ? std::max<int64_t>(1, kept())
                : std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(opt_.shuffle_window) *
                                                            static_cast<double>(opt_.max_tokens) / mean_width));
}

TokenBatcher::TokenBatcher(const std::vector<int32_t>& src_len, const std::vector<int32_t>& tgt_len,
                           const BatchingOptions& o)
    : pairs_(static_cast<int64_t>(src_len.size())), opt_(o) {
  CMHA_CHECK(src_len.size() == tgt_len.size(), "token batches: " + std::to_string(src_len.size()) +
                                                   " source lengths but " + std::to_string(tgt_len.size()) +
                                                   " target lengths");
  check_options();
  check_pair_count(pairs_, "token batches");
  kept_.reserve(src_len.size());
  src_len_.reserve(src_len.size());
  tgt_len_.reserve(src_len.size());
  for (int64_t i = 0; i < pairs_; ++i) keep_if_short(i, src_len[i], tgt_len[i]);
  finish_keeping();
}

TokenBatcher::TokenBatcher(const TokenCache& src, const TokenCache& tgt, const BatchingOptions& o)
    : pairs_(src.size()), opt_(o) {
  CMHA_CHECK(src.size() == tgt.size(), "token caches '" + src.path() + "' and '" + tgt.path() + "' hold " +
                                           std::to_string(src.size()) + " and " + std::to_string(tgt.size()) +
                                           " sentences: they are not one parallel corpus");
  check_options();
  check_pair_count(pairs_, "token cache '" + src.path() + "'");
  kept_.reserve(static_cast<size_t>(pairs_));
  src_len_.reserve(static_cast<size_t>(pairs_));
  tgt_len_.reserve(static_cast<size_t>(pairs_));
  std::vector<int32_t> s(static_cast<size_t>(std::min(pairs_, kLengthChunk))), t(s.size());
  for (int64_t first = 0; first < pairs_; first += kLengthChunk) {
    const int64_t n = std::min(kLengthChunk, pairs_ - first);
    src.read_lengths(first, n, s.data());
    tgt.read_lengths(first, n, t.data());
    // As the model sees them: source + eos, target + bos (input) / eos (output); a length beyond int32 is
    // longer than any max_len anyway.
    for (int64_t k = 0; k < n; ++k)
      keep_if_short(first + k, s[k] == INT32_MAX ? s[k] : s[k] + 1, t[k] == INT32_MAX ? t[k] : t[k] + 1);
  }
  finish_keeping();
}

void TokenBatcher::sort_and_pack(uint32_t* first, uint32_t* last, std::vector<int64_t>& ends) const {
  const int64_t n = last - first;
  if (n == 0) return;
  const int L = len_bits_;
  const int P = static_cast<int>(std::bit_width(static_cast<uint64_t>(n - 1)));  // bits of a position in the range
  const uint64_t len_mask = (uint64_t{1} << L) - 1;
  const std::vector<uint32_t> window(first, last);
  if (3 * L + P <= 64) {
    // One 64-bit key a pair: (width, target, source, position), all distinct, so a plain sort is the stable
    // sort by length; the lengths come back out of the sorted keys for packing (no lookup per comparison).
    std::vector<uint64_t> keys(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      const uint64_t s = src_len_[window[k]], t = tgt_len_[window[k]];
      keys[k] = (std::max(s, t) << (2 * L + P)) | (t << (L + P)) | (s << P) | static_cast<uint64_t>(k);
    }
    std::sort(keys.begin(), keys.end());
    const uint64_t pos_mask = (uint64_t{1} << P) - 1;  // P < 64: n < 2^31
    for (int64_t k = 0; k < n; ++k) first[k] = window[keys[k] & pos_mask];
    pack_ends(n, [&](int64_t k) {
      return std::pair<int64_t, int64_t>((keys[k] >> P) & len_mask, (keys[k] >> (L + P)) & len_mask);
    }, opt_.max_tokens, ends);
  } else {
    // Lengths too long to share 64 bits with the position: a stable sort of positions by a key of the lengths.
    std::vector<uint64_t> length_keys(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      const uint64_t s = src_len_[window[k]], t = tgt_len_[window[k]];
      length_keys[k] = (std::max(s, t) << (2 * L)) | (t << L) | s;
    }
    std::vector<uint32_t> by_length(static_cast<size_t>(n));
    std::iota(by_length.begin(), by_length.end(), 0u);
    std::stable_sort(by_length.begin(), by_length.end(),
                     [&](uint32_t a, uint32_t b) { return length_keys[a] < length_keys[b]; });
    for (int64_t k = 0; k < n; ++k) first[k] = window[by_length[k]];
    pack_ends(n, [&](int64_t k) {
      return std::pair<int64_t, int64_t>(src_len_[first[k]], tgt_len_[first[k]]);
    }, opt_.max_tokens, ends);
  }
}

PackedBatches TokenBatcher::epoch_batches(int64_t epoch) const {
  const uint64_t e = static_cast<uint64_t>(epoch);
  // Every rank plans the whole epoch (the same everywhere) in one array of kept positions, 4 bytes a pair,
  // and keeps only its own batches' pair indices.
  // 1. The kept pairs in an order that depends only on (seed, epoch).
  std::vector<uint32_t> order = philox_order(kept(), opt_.seed, 2 * e);
  // 2. Sorted by length inside each window, packed: batch b is order[begins[b], begins[b + 1]).
  std::vector<int64_t> begins = {0};
  std::vector<int64_t> ends;
  for (int64_t start = 0; start < kept(); start += window_) {
    const int64_t end = std::min(kept(), start + window_);
    ends.clear();
    sort_and_pack(order.data() + start, order.data() + end, ends);
    for (int64_t x : ends) begins.push_back(start + x);
  }
  const int64_t batches = static_cast<int64_t>(begins.size()) - 1;
  // 3. The batches shuffled, so lengths mix over the epoch.
  const std::vector<uint64_t> bkeys = philox_sort_keys(batches, opt_.seed, 2 * e + 1);
  std::vector<int64_t> border(static_cast<size_t>(batches));
  std::iota(border.begin(), border.end(), 0);
  std::sort(border.begin(), border.end(), [&](int64_t a, int64_t b) { return bkeys[a] < bkeys[b]; });
  // 4. Round-robin to the ranks; the last (batches mod world) are left out so all ranks get as many.
  const size_t per_rank = static_cast<size_t>(batches) / static_cast<size_t>(opt_.world);
  std::vector<int64_t> mine_begins = {0};
  mine_begins.reserve(per_rank + 1);
  for (size_t i = 0; i < per_rank; ++i) {
    const int64_t b = border[i * opt_.world + opt_.rank];
    mine_begins.push_back(mine_begins.back() + begins[b + 1] - begins[b]);
  }
  std::vector<int32_t> mine(static_cast<size_t>(mine_begins.back()));
  for (size_t i = 0; i < per_rank; ++i) {
    const int64_t b = border[i * opt_.world + opt_.rank];
    for (int64_t k = begins[b], at = mine_begins[i]; k < begins[b + 1]; ++k, ++at)
      mine[at] = static_cast<int32_t>(kept_[order[k]]);
  }
  return PackedBatches(std::move(mine), std::move(mine_begins));
}

PackedBatches TokenBatcher::sorted_batches() const {
  std::vector<uint32_t> order(kept_.size());
  std::iota(order.begin(), order.end(), 0u);
  std::vector<int64_t> begins = {0};
  sort_and_pack(order.data(), order.data() + order.size(), begins);
  std::vector<int32_t> pairs(order.size());
  for (size_t k = 0; k < order.size(); ++k) pairs[k] = static_cast<int32_t>(kept_[order[k]]);
  return PackedBatches(std::move(pairs), std::move(begins));
}

TranslationBatch make_batch(const TokenCache& src, const TokenCache& tgt, Batch idx, int32_t pad, int32_t bos,
                            int32_t eos) {
  TranslationBatch b;
  const int64_t B = static_cast<int64_t>(idx.size());
  CMHA_CHECK(B > 0, "make_batch: an empty batch");
  // The batch's sentences read from the caches' files (TokenCache::read_ids: none through the maps).
  std::vector<std::vector<int32_t>> xs(static_cast<size_t>(B)), ys(static_cast<size_t>(B));
  int64_t S = 0, T = 0;
  for (int64_t r = 0; r < B; ++r) {
    src.read_ids(idx[r], xs[r]);
    tgt.read_ids(idx[r], ys[r]);
    S = std::max(S, static_cast<int64_t>(xs[r].size()) + 1);
    T = std::max(T, static_cast<int64_t>(ys[r].size()) + 1);
  }
  b.src = Tensor::full({B, S}, pad, DType::i64);
  b.src_pad = Tensor::ones({B, S}, DType::b8);
  b.tgt_in = Tensor::full({B, T}, pad, DType::i64);
  b.tgt_out = Tensor::full({B, T}, pad, DType::i64);
  int64_t* s = b.src.data<int64_t>();
  bool* sp = b.src_pad.data<bool>();
  int64_t* ti = b.tgt_in.data<int64_t>();
  int64_t* to = b.tgt_out.data<int64_t>();
  for (int64_t r = 0; r < B; ++r) {
    const int64_t ls = static_cast<int64_t>(xs[r].size()), lt = static_cast<int64_t>(ys[r].size());
    const int32_t* x = xs[r].data();
    const int32_t* y = ys[r].data();
    for (int64_t k = 0; k < ls; ++k) s[r * S + k] = x[k];
    s[r * S + ls] = eos;
    for (int64_t k = 0; k <= ls; ++k) sp[r * S + k] = false;
    ti[r * T] = bos;
    for (int64_t k = 0; k < lt; ++k) {
      ti[r * T + k + 1] = y[k];
      to[r * T + k] = y[k];
    }
    to[r * T + lt] = eos;
    b.src_tokens += ls + 1;
    b.tgt_tokens += lt + 1;
  }
  b.sentences = B;
  return b;
}

}  // namespace cmha::data
