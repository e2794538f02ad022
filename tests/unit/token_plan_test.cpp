// The compact epoch plan of data/token_batches.cpp (32-bit positions, 16-bit
// lengths, bucketed Philox order, one 64-bit key a pair when sorting by length)
// against the plan it replaced, kept here as the reference: 8-byte sort keys,
// int32 lengths of every pair, a comparator stable sort, a vector per batch.
// Every rank must train on exactly the batches it trained on before.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "data/token_batches.h"
#include "support/check.h"

namespace cmha {
namespace {

namespace fs = std::filesystem;

// The batcher as it was before the compact plan (token_batches.cpp at 84046b6), for one rank of `o`.
std::vector<std::vector<int32_t>> plan_before_compact(const std::vector<int32_t>& src_len,
                                                      const std::vector<int32_t>& tgt_len,
                                                      const data::BatchingOptions& o, int64_t epoch) {
  auto width = [&](int64_t i) { return static_cast<int64_t>(std::max(src_len[i], tgt_len[i])); };
  std::vector<int64_t> kept;
  double width_sum = 0;
  for (size_t i = 0; i < src_len.size(); ++i)
    if (src_len[i] <= o.max_len && tgt_len[i] <= o.max_len) {
      kept.push_back(static_cast<int64_t>(i));
      width_sum += width(static_cast<int64_t>(i));
    }
  const int64_t n = static_cast<int64_t>(kept.size());
  const double mean_width = kept.empty() ? 1.0 : width_sum / static_cast<double>(n);
  const int64_t window =
      o.shuffle_window == 0
          ? std::max<int64_t>(1, n)
          : std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(o.shuffle_window) *
                                                      static_cast<double>(o.max_tokens) / mean_width));
  const uint64_t e = static_cast<uint64_t>(epoch);
  std::vector<uint64_t> keys = data::philox_sort_keys(n, o.seed, 2 * e);
  std::sort(keys.begin(), keys.end());
  std::vector<int64_t> order;
  for (uint64_t k : keys) order.push_back(kept[k & 0xffffffffull]);
  std::vector<int64_t> begins = {0};
  for (int64_t start = 0; start < n; start += window) {
    const int64_t end = std::min(n, start + window);
    std::stable_sort(order.begin() + start, order.begin() + end, [&](int64_t a, int64_t b) {
      if (width(a) != width(b)) return width(a) < width(b);
      if (tgt_len[a] != tgt_len[b]) return tgt_len[a] < tgt_len[b];
      return src_len[a] < src_len[b];
    });
    int64_t max_s = 0, max_t = 0, size = 0;
    for (int64_t p = start; p < end; ++p) {
      const int64_t i = order[p];
      const int64_t s = std::max<int64_t>(max_s, src_len[i]), t = std::max<int64_t>(max_t, tgt_len[i]);
      if (size > 0 && (size + 1) * std::max(s, t) > o.max_tokens) {
        begins.push_back(p);
        size = 0;
        max_s = src_len[i];
        max_t = tgt_len[i];
      } else {
        max_s = s;
        max_t = t;
      }
      ++size;
    }
    if (size > 0) begins.push_back(end);
  }
  const int64_t batches = static_cast<int64_t>(begins.size()) - 1;
  const std::vector<uint64_t> bkeys = data::philox_sort_keys(batches, o.seed, 2 * e + 1);
  std::vector<int64_t> border(static_cast<size_t>(batches));
  std::iota(border.begin(), border.end(), 0);
  std::sort(border.begin(), border.end(), [&](int64_t a, int64_t b) { return bkeys[a] < bkeys[b]; });
  std::vector<std::vector<int32_t>> mine;
  for (int64_t i = 0; i < batches / o.world; ++i) {
    const int64_t b = border[i * o.world + o.rank];
    mine.emplace_back(order.begin() + begins[b], order.begin() + begins[b + 1]);
  }
  return mine;
}

// n pairs of lengths in [1, longest], a few of them (1 in 16) far longer than the rest.
std::pair<std::vector<int32_t>, std::vector<int32_t>> plan_test_lengths(int64_t n, int32_t longest, uint32_t seed) {
  std::vector<int32_t> s(n), t(n);
  uint32_t state = seed;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return state >> 8;
  };
  for (int64_t i = 0; i < n; ++i) {
    const int32_t cap = next() % 16 == 0 ? longest : std::min<int32_t>(longest, 60);
    s[i] = 1 + static_cast<int32_t>(next() % static_cast<uint32_t>(cap));
    t[i] = 1 + static_cast<int32_t>(next() % static_cast<uint32_t>(cap));
  }
  return {s, t};
}

TEST(TokenPlan, PhiloxOrderIsTheOrderOfTheSortedKeys) {
  for (int64_t n : {0, 1, 2, 5, 17, 1000, 100003}) {
    std::vector<uint64_t> keys = data::philox_sort_keys(n, 11, 4);
    std::sort(keys.begin(), keys.end());
    const std::vector<uint32_t> order = data::philox_order(n, 11, 4);
    ASSERT_EQ(order.size(), keys.size());
    for (size_t k = 0; k < keys.size(); ++k) ASSERT_EQ(order[k], static_cast<uint32_t>(keys[k])) << n << " at " << k;
  }
}

TEST(TokenPlan, CompactPlanEqualsThePlanBeforeIt) {
  struct Case {
    int64_t pairs, max_tokens, max_len, shuffle_window;
    int32_t longest;
    int world;
  };
  // Windows of a few pairs to the whole epoch; ranks 1 to 3; a max_len that drops pairs or keeps them all.
  const Case cases[] = {{5000, 400, 64, 10, 100, 1}, {5000, 400, 64, 10, 100, 3}, {20000, 4096, 128, 100, 200, 2},
                        {3000, 300, 300, 0, 250, 1}, {3000, 64, 64, 1, 70, 2},    {1, 100, 100, 5, 50, 1}};
  for (const Case& c : cases) {
    const auto [s, t] = plan_test_lengths(c.pairs, c.longest, static_cast<uint32_t>(c.pairs + c.world));
    for (int rank = 0; rank < c.world; ++rank)
      for (uint64_t seed : {1, 9})
        for (int64_t epoch : {0, 3}) {
          data::BatchingOptions o;
          o.max_tokens = c.max_tokens;
          o.max_len = c.max_len;
          o.shuffle_window = c.shuffle_window;
          o.seed = seed;
          o.rank = rank;
          o.world = c.world;
          const auto now = data::TokenBatcher(s, t, o).epoch_batches(epoch).to_vectors();
          ASSERT_EQ(now, plan_before_compact(s, t, o, epoch))
              << c.pairs << " pairs, window " << c.shuffle_window << ", rank " << rank << " of " << c.world
              << ", seed " << seed << ", epoch " << epoch;
          ASSERT_FALSE(c.pairs > 1 && now.empty());
        }
  }
}

TEST(TokenPlan, LongSentencesInAWholeEpochWindowTakeTheStableSortAndPlanTheSame) {
  // Lengths of 16 bits and a window of 2^17 pairs leave no room for the position in a 64-bit key.
  const auto [s, t] = plan_test_lengths(140000, 40000, 5);
  data::BatchingOptions o;
  o.max_tokens = 65535;
  o.max_len = 65535;
  o.shuffle_window = 0;
  EXPECT_EQ(data::TokenBatcher(s, t, o).epoch_batches(2).to_vectors(), plan_before_compact(s, t, o, 2));
}

TEST(TokenPlan, BatchesFromTheCachesEqualThoseFromTheirLengths) {
  const std::string dir = test::temp_dir("token_plan");
  const auto [s, t] = plan_test_lengths(3000, 90, 3);
  std::vector<std::vector<int32_t>> src(s.size()), tgt(t.size());
  std::vector<int32_t> model_s(s.size()), model_t(t.size());
  for (size_t i = 0; i < s.size(); ++i) {
    src[i].assign(static_cast<size_t>(s[i]) - (i % 7 == 0), 5);  // some sentences empty
    tgt[i].assign(static_cast<size_t>(t[i]), 6);
    model_s[i] = static_cast<int32_t>(src[i].size()) + 1;
    model_t[i] = static_cast<int32_t>(tgt[i].size()) + 1;
  }
  data::TokenCache::write(dir + "/s.bin", 1, src);
  data::TokenCache::write(dir + "/t.bin", 2, tgt);
  const data::TokenCache cs(dir + "/s.bin"), ct(dir + "/t.bin");
  std::vector<int32_t> lengths(10);
  cs.read_lengths(2990, 10, lengths.data());
  for (int k = 0; k < 10; ++k) EXPECT_EQ(lengths[k], static_cast<int32_t>(src[2990 + k].size()));
  data::BatchingOptions o;
  o.max_tokens = 500;
  o.max_len = 80;
  o.world = 2;
  o.rank = 1;
  const data::TokenBatcher from_caches(cs, ct, o), from_lengths(model_s, model_t, o);
  EXPECT_EQ(from_caches.kept(), from_lengths.kept());
  EXPECT_GT(from_caches.dropped(), 0);
  EXPECT_EQ(from_caches.epoch_batches(1), from_lengths.epoch_batches(1));
  EXPECT_EQ(from_caches.sorted_batches(), from_lengths.sorted_batches());
  fs::remove_all(dir);
}

// Kilobytes of `path`'s mappings resident in this process (/proc/self/smaps), -1 if it is not mapped.
int64_t resident_kb_of_mapping(const std::string& path) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in = false, found = false;
  int64_t kb = 0;
  while (std::getline(smaps, line)) {
    const std::string first = line.substr(0, line.find(' '));
    if (first.find('-') != std::string::npos && first.find(':') == std::string::npos) {  // a mapping's header
      in = line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0;
      found = found || in;
    } else if (in && line.rfind("Rss:", 0) == 0) {
      kb += std::stoll(line.substr(4));
    }
  }
  return found ? kb : -1;
}

TEST(TokenPlan, BatchesAreReadWithoutTouchingTheCachesMaps) {
  const std::string dir = test::temp_dir("token_plan_rss");
  std::vector<std::vector<int32_t>> sentences(40000);
  for (size_t i = 0; i < sentences.size(); ++i) sentences[i].assign(1 + i % 23, static_cast<int32_t>(i));
  data::TokenCache::write(dir + "/s.bin", 1, sentences);
  data::TokenCache::write(dir + "/t.bin", 2, sentences);
  const std::string src_path = fs::canonical(dir + "/s.bin").string();
  const data::TokenCache cs(src_path), ct(dir + "/t.bin");
  std::vector<int32_t> pairs;
  for (int32_t i = 7; i < 40000; i += 997) pairs.push_back(i);  // scattered over the file, as a batch is
  const data::TranslationBatch b = data::make_batch(cs, ct, pairs, 0, 2, 3);
  EXPECT_EQ(b.src.to_i64_vector()[0], 7);
  std::vector<int32_t> ids;
  cs.read_ids(39999, ids);
  EXPECT_EQ(ids, sentences[39999]);
  cs.read_ids(0, ids);
  EXPECT_EQ(ids, sentences[0]);
  EXPECT_NE(test::error_of([&] { cs.read_ids(40000, ids); }).find("sentence 40000 is outside its 40000"),
            std::string::npos);
  // Opening (the offsets checked), the plan's lengths and the batch all read by pread: nothing of the map is resident.
  std::vector<int32_t> lengths(40000);
  cs.read_lengths(0, 40000, lengths.data());
  EXPECT_EQ(lengths[22], 23);
  EXPECT_EQ(resident_kb_of_mapping(src_path), 0);
  fs::remove_all(dir);
}

TEST(TokenPlan, ACorpusOf2To31PairsOrMoreIsRefusedInOneSentence) {
  data::check_pair_count((int64_t{1} << 31) - 1, "train.bin");
  const std::string msg = test::error_of([] { data::check_pair_count(int64_t{1} << 31, "token cache 'train.bin'"); });
  EXPECT_NE(msg.find("token cache 'train.bin': 2147483648 pairs is more than the 2^31 - 1 that batching indexes"),
            std::string::npos)
      << msg;
}

TEST(TokenPlan, AMaxLenBeyond16BitsIsRefused) {
  data::BatchingOptions o;
  o.max_tokens = 100000;
  o.max_len = 70000;
  const std::string msg = test::error_of([&] { data::TokenBatcher b({1}, {1}, o); });
  EXPECT_NE(msg.find("data.max_len (70000) must be at most 65535"), std::string::npos) << msg;
}

}  // namespace
}  // namespace cmha
