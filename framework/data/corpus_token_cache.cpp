#include "data/corpus_token_cache.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

#include "tensor/clock.h"
#include "tensor/error.h"

namespace cmha::data {

namespace {

namespace fs = std::filesystem;

// File times are kept at a filesystem's granularity (up to 2 s on some), so a
// write just after a hash can leave the mtime the hash saw.
constexpr int64_t kRacyNs = 2'000'000'000;
constexpr size_t kEncodeChunk = size_t{1} << 16;  // lines encoded (in parallel) per step of a build

int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The identity to store for a file hashed from `hash_started_ns` on: its mtime, or 0 when too recent to vouch
// for the bytes hashed.
FileIdentity vouching(FileIdentity id, int64_t hash_started_ns) {
  if (id.mtime_ns > hash_started_ns - kRacyNs) id.mtime_ns = 0;
  return id;
}

// One side of the split: its corpus file, its cache file and the key its ids are made under.
class Side {
 public:
  Side(std::string corpus, std::string cache, uint64_t key_base)
      : corpus_(std::move(corpus)), cache_(std::move(cache)), key_base_(key_base) {}
  const std::string& corpus() const { return corpus_; }
  const std::string& cache() const { return cache_; }
  uint64_t key(uint64_t digest) const { return hash_combine(key_base_, digest); }
  bool rehashed() const { return rehashed_; }

  // Whether the cache holds the corpus's ids now; see the header for the rules. `record` (the main rank):
  // after a re-hash that keeps the cache, store the corpus's new mtime so the next start reads nothing.
  bool fresh(bool record) {
    const std::optional<TokenCache::Header> h = TokenCache::read_header(cache_);
    if (!h) return false;
    FileIdentity now = file_identity(corpus_);
    if (h->corpus.bytes != now.bytes) return false;
    if (h->corpus.mtime_ns != 0 && h->corpus.mtime_ns == now.mtime_ns) return h->key == key(h->corpus.digest);
    // The size matches but the mtime moved (or was never vouched for): the bytes decide, hashed once per state
    // of the file (a waiting rank asks again and again).
    if (!hashed_ || hashed_->bytes != now.bytes || hashed_->mtime_ns != now.mtime_ns) {
      const int64_t started = wall_clock_ns();
      const CorpusFileScan scan = scan_corpus_file(corpus_);
      hashed_ = scan.identity;
      vouched_ = vouching(scan.identity, started);
      rehashed_ = true;
    }
    if (h->key != key(hashed_->digest)) return false;
    if (record && vouched_.mtime_ns != 0 && vouched_.mtime_ns != h->corpus.mtime_ns)
      TokenCache::rewrite_corpus_identity(cache_, vouched_);
    return true;
  }

  // Encodes the corpus (`scan`: its identity and line count, hashed from `hash_started_ns` on) into the cache.
  void build(const CorpusFileScan& scan, int64_t hash_started_ns, const SentencePieceVocab& vocab) const {
    TokenCacheWriter writer(cache_, scan.lines);
    std::vector<std::string> chunk;
    std::vector<std::vector<int>> ids;
    std::string error;
    auto encode_chunk = [&] {
      const int64_t n = static_cast<int64_t>(chunk.size());
      ids.assign(chunk.size(), {});
#pragma omp parallel for schedule(dynamic, 256)
      for (int64_t i = 0; i < n; ++i) {
        try {
          ids[i] = vocab.encode(chunk[i]);
        } catch (const std::exception& ex) {
#pragma omp critical(cmha_encode_error)
          if (error.empty()) error = ex.what();
        }
      }
      CMHA_CHECK(error.empty(), error);
      for (const std::vector<int>& s : ids) writer.append(s.data(), s.size());
      chunk.clear();
    };
    static_assert(sizeof(int) == sizeof(int32_t));
    chunk.reserve(kEncodeChunk);
    const uint64_t lines = for_each_text_line(corpus_, [&](std::string&& line) {
      // More lines than counted: the file grew; stop before the writer is overrun.
      CMHA_CHECK(writer.appended() + chunk.size() < scan.lines,
                 "corpus file '" + corpus_ + "' changed while it was being encoded");
      chunk.push_back(std::move(line));
      if (chunk.size() == kEncodeChunk) encode_chunk();
    });
    encode_chunk();
    const FileIdentity after = file_identity(corpus_);
    CMHA_CHECK(lines == scan.lines && after.bytes == scan.identity.bytes && after.mtime_ns == scan.identity.mtime_ns,
               "corpus file '" + corpus_ + "' changed while it was being encoded");
    writer.finish(key(scan.identity.digest), vouching(scan.identity, hash_started_ns));
  }

 private:
  std::string corpus_, cache_;
  uint64_t key_base_;
  std::optional<FileIdentity> hashed_;  // the corpus as last hashed here
  FileIdentity vouched_;                // the same, its mtime 0 when too recent to vouch for the digest
  bool rehashed_ = false;
};

void check_same_lines(const Side& src, uint64_t src_lines, const Side& tgt, uint64_t tgt_lines) {
  CMHA_CHECK(src_lines == tgt_lines, "parallel corpus sides differ: '" + src.corpus() + "' has " +
                                         std::to_string(src_lines) + " lines but '" + tgt.corpus() + "' has " +
                                         std::to_string(tgt_lines));
}

}  // namespace

void wait_for_rank0(const std::function<bool()>& ready, const std::string& what) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!ready()) {
    CMHA_CHECK(seconds_since(t0) < 3600, "waited an hour for rank 0 to write " + what);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

ParallelTokenCaches load_or_encode_parallel(const std::string& source_path, const std::string& target_path,
                                            const SentencePieceVocab& vocab, uint64_t recipe_key,
                                            const std::string& cache_dir, const std::string& name, bool main) {
  const uint64_t base = hash_combine(recipe_key, vocab.model_hash());
  Side src(source_path, (fs::path(cache_dir) / (name + ".src.bin")).string(), base);
  Side tgt(target_path, (fs::path(cache_dir) / (name + ".tgt.bin")).string(), base ^ 1);
  ParallelTokenCaches out;
  if (!main) {
    wait_for_rank0([&] { return src.fresh(false) && tgt.fresh(false); },
                   "the token caches " + src.cache() + " and " + tgt.cache());
  } else {
    const bool src_fresh = src.fresh(true), tgt_fresh = tgt.fresh(true);
    if (!src_fresh || !tgt_fresh) {
      const auto t0 = std::chrono::steady_clock::now();
      // Both sides' line counts are known (from a scan or the fresh cache) before either is encoded.
      struct Plan {
        Side* side;
        bool fresh;
        CorpusFileScan scan;
        int64_t started = 0;
      } plans[2] = {{&src, src_fresh, {}}, {&tgt, tgt_fresh, {}}};
      for (Plan& p : plans) {
        if (p.fresh) {
          p.scan.lines = TokenCache::read_header(p.side->cache())->count;
        } else {
          p.started = wall_clock_ns();
          p.scan = scan_corpus_file(p.side->corpus());
        }
      }
      check_same_lines(src, plans[0].scan.lines, tgt, plans[1].scan.lines);
      for (const Plan& p : plans)
        if (!p.fresh) p.side->build(p.scan, p.started, vocab);
      out.encoded = true;
      std::fprintf(stderr, "data: encoded %llu pairs of %s / %s into %s/%s.{src,tgt}.bin in %.1f s\n",
                   static_cast<unsigned long long>(plans[0].scan.lines), source_path.c_str(), target_path.c_str(),
                   cache_dir.c_str(), name.c_str(), seconds_since(t0));
    }
  }
  out.rehashed = src.rehashed() || tgt.rehashed();
  out.src = TokenCache(src.cache());
  out.tgt = TokenCache(tgt.cache());
  check_same_lines(src, static_cast<uint64_t>(out.src.size()), tgt, static_cast<uint64_t>(out.tgt.size()));
  // What was checked fresh is what was mapped: another run rebuilding them in between would show in the keys.
  const std::optional<TokenCache::Header> hs = TokenCache::read_header(src.cache()),
                                          ht = TokenCache::read_header(tgt.cache());
  CMHA_CHECK(hs && ht && hs->key == out.src.key() && ht->key == out.tgt.key() &&
                 out.src.key() == src.key(hs->corpus.digest) && out.tgt.key() == tgt.key(ht->corpus.digest),
             "token caches '" + src.cache() + "' and '" + tgt.cache() + "' changed while being read (another run?)");
  return out;
}

}  // namespace cmha::data
