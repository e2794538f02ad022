#include "data/token_batches.h"

#include <numeric>

#include "tensor/error.h"
#include "tensor/rng.h"

namespace cmha::data {

std::vector<uint64_t> philox_sort_keys(int64_t n, uint64_t seed, uint64_t stream) {
  const Generator gen(seed * 1000003ull + stream * 0x9E3779B97F4A7C15ull + 0x42ull);
  std::vector<uint64_t> keys(static_cast<size_t>(n));
  for (int64_t c = 0; c * 4 < n; ++c) {
    const auto r = philox_block(static_cast<uint64_t>(c), gen.key());
    for (int64_t k = 0; k < 4 && c * 4 + k < n; ++k) {
      const int64_t i = c * 4 + k;
      // 32 random bits above the index: distinct keys, so any sort gives one order.
      keys[i] = (static_cast<uint64_t>(r[k]) << 32) | static_cast<uint32_t>(i);
    }
  }
  return keys;
}

TokenBatcher::TokenBatcher(std::vector<int32_t> src_len, std::vector<int32_t> tgt_len, const BatchingOptions& o)
    : src_len_(std::move(src_len)), tgt_len_(std::move(tgt_len)), opt_(o) {
  CMHA_CHECK(src_len_.size() == tgt_len_.size(), "token batches: " + std::to_string(src_len_.size()) +
                                                     " source lengths but " + std::to_string(tgt_len_.size()) +
                                                     " target lengths");
  CMHA_CHECK(o.max_tokens >= 1 && o.max_len >= 1 && o.max_len <= o.max_tokens,
             "data.max_len (" + std::to_string(o.max_len) + ") must be at most data.max_tokens (" +
                 std::to_string(o.max_tokens) + "): a pair that long could not fit in any batch");
  CMHA_CHECK(o.world >= 1 && o.rank >= 0 && o.rank < o.world,
             "rank " + std::to_string(o.rank) + " is outside a world of " + std::to_string(o.world));
  CMHA_CHECK(o.shuffle_window >= 0, "data.shuffle_window must not be negative");
  double width_sum = 0;
  for (size_t i = 0; i < src_len_.size(); ++i)
    if (src_len_[i] <= o.max_len && tgt_len_[i] <= o.max_len) {
      kept_.push_back(static_cast<int64_t>(i));
      width_sum += width(static_cast<int64_t>(i));
    }
  const double mean_width = kept_.empty() ? 1.0 : width_sum / static_cast<double>(kept_.size());
  window_ = o.shuffle_window == 0
                ? std::max<int64_t>(1, kept())
                : std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(o.shuffle_window) *
                                                            static_cast<double>(o.max_tokens) / mean_width));
}

void TokenBatcher::sort_by_length(int64_t* first, int64_t* last) const {
  // By padded width, then target and source length; stable, so ties keep the shuffled order.
  std::stable_sort(first, last, [&](int64_t a, int64_t b) {
    const int64_t wa = width(a), wb = width(b);
    if (wa != wb) return wa < wb;
    if (tgt_len_[a] != tgt_len_[b]) return tgt_len_[a] < tgt_len_[b];
    return src_len_[a] < src_len_[b];
  });
}

void TokenBatcher::pack_ends(const int64_t* first, const int64_t* last, std::vector<int64_t>& ends) const {
  int64_t max_s = 0, max_t = 0, size = 0;
  for (const int64_t* p = first; p != last; ++p) {
    const int64_t i = *p;
    const int64_t s = std::max<int64_t>(max_s, src_len_[i]), t = std::max<int64_t>(max_t, tgt_len_[i]);
    if (size > 0 && (size + 1) * std::max(s, t) > opt_.max_tokens) {
      ends.push_back(p - first);
      size = 0;
      max_s = src_len_[i];
      max_t = tgt_len_[i];
    } else {
      max_s = s;
      max_t = t;
    }
    ++size;
  }
  if (size > 0) ends.push_back(last - first);
}

std::vector<Batch> TokenBatcher::pack(const std::vector<int64_t>& order) const {
  std::vector<int64_t> ends;
  pack_ends(order.data(), order.data() + order.size(), ends);
  std::vector<Batch> out;
  int64_t begin = 0;
  for (int64_t end : ends) {
    out.emplace_back(order.begin() + begin, order.begin() + end);
    begin = end;
  }
  return out;
}

std::vector<Batch> TokenBatcher::epoch_batches(int64_t epoch) const {
  const uint64_t e = static_cast<uint64_t>(epoch);
  // Every rank computes the whole epoch's batching (the same everywhere) but keeps only its own batches: one
  // array of the kept pairs' order and the batches' ends, then its batches copied out (a few hundred MB less
  // per rank at WMT14's 4.5 M pairs than a vector per batch of the epoch).
  // 1. The kept pairs in an order that depends only on (seed, epoch). A key holds its position in kept_ in
  // its low 32 bits and keys are distinct, so sorting the keys themselves orders the positions; each sorted
  // key is then replaced, in place, by its pair's index.
  CMHA_CHECK(kept() < (int64_t{1} << 32), "token batches: more than 2^32 pairs");
  std::vector<uint64_t> keys = philox_sort_keys(kept(), opt_.seed, 2 * e);
  std::sort(keys.begin(), keys.end());
  for (uint64_t& k : keys) k = static_cast<uint64_t>(kept_[k & 0xffffffffull]);
  int64_t* order = reinterpret_cast<int64_t*>(keys.data());  // signed view of the same indices
  // 2. Sorted by length inside each window, packed: batch b is order[begins[b], begins[b + 1]).
  std::vector<int64_t> begins = {0};
  std::vector<int64_t> ends;
  for (int64_t start = 0; start < kept(); start += window_) {
    const int64_t end = std::min(kept(), start + window_);
    sort_by_length(order + start, order + end);
    ends.clear();
    pack_ends(order + start, order + end, ends);
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
  std::vector<Batch> mine;
  mine.reserve(per_rank);
  for (size_t i = 0; i < per_rank; ++i) {
    const int64_t b = border[i * opt_.world + opt_.rank];
    mine.emplace_back(order + begins[b], order + begins[b + 1]);
  }
  return mine;
}

std::vector<Batch> TokenBatcher::sorted_batches() const {
  std::vector<int64_t> order = kept_;
  sort_by_length(order.data(), order.data() + order.size());
  return pack(order);
}

TranslationBatch make_batch(const TokenCache& src, const TokenCache& tgt, const Batch& idx, int32_t pad, int32_t bos,
                            int32_t eos) {
  TranslationBatch b;
  const int64_t B = static_cast<int64_t>(idx.size());
  CMHA_CHECK(B > 0, "make_batch: an empty batch");
  int64_t S = 0, T = 0;
  for (int64_t i : idx) {
    S = std::max(S, src.length(i) + 1);
    T = std::max(T, tgt.length(i) + 1);
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
    const int64_t i = idx[r];
    const int64_t ls = src.length(i), lt = tgt.length(i);
    const int32_t* x = src.ids(i);
    const int32_t* y = tgt.ids(i);
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
