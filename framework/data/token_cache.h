#pragma once
// Encoded sentences in a binary file, so epochs never tokenise again and a rank
// reads only the sentences of its batches (by pread: read_ids, read_lengths;
// the map behind ids() is for small files and tests, see read_ids). Layout
// (little-endian):
//   64-byte header: magic "CMHATOK1", u32 format version (2), u32 bytes per id (4),
//                   u64 key, u64 sentences N, u64 ids in all,
//                   the corpus file's identity: u64 bytes, i64 mtime (ns), u64 digest
//   u64 offsets[N + 1]   (sentence i is ids[offsets[i], offsets[i+1]))
//   i32 ids[...]
// The key says what the ids were made from (the corpus's digest, SentencePiece
// model, recipe); a file whose key differs is stale and is rebuilt by the
// caller. The corpus identity lets a caller trust the key without reading the
// corpus while its size and mtime are unchanged (data/corpus_token_cache.h).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/text_corpus.h"
#include "tensor/atomic_file.h"

namespace cmha::data {

class TokenCache {
 public:
  TokenCache() = default;
  // Maps `path`; a missing, truncated or foreign file is an error naming it.
  explicit TokenCache(const std::string& path);
  TokenCache(TokenCache&& other) noexcept;
  TokenCache& operator=(TokenCache&& other) noexcept;
  TokenCache(const TokenCache&) = delete;
  TokenCache& operator=(const TokenCache&) = delete;
  ~TokenCache();

  // Writes sentences (atomically: a temporary file renamed over `path`).
  static void write(const std::string& path, uint64_t key, const std::vector<std::vector<int32_t>>& sentences,
                    const FileIdentity& corpus = {});
  // The key stored in `path`, or false when it is missing or not a cache file.
  static bool read_key(const std::string& path, uint64_t* key);
  struct Header {
    uint64_t key = 0, count = 0, total = 0;
    FileIdentity corpus;
  };
  // The header of `path`, or nothing when it is missing or not a cache file (of this format).
  static std::optional<Header> read_header(const std::string& path);
  // Replaces the corpus identity in `path`'s header in place (the ids are unchanged: only the corpus's
  // mtime moved); false when `path` is not a cache file.
  static bool rewrite_corpus_identity(const std::string& path, const FileIdentity& corpus);

  const std::string& path() const { return path_; }
  uint64_t key() const { return key_; }
  int64_t size() const { return static_cast<int64_t>(count_); }
  int64_t total_ids() const { return static_cast<int64_t>(total_); }
  int64_t length(int64_t i) const { return static_cast<int64_t>(offsets_[i + 1] - offsets_[i]); }
  const int32_t* ids(int64_t i) const { return ids_ + offsets_[i]; }
  std::vector<int32_t> sentence(int64_t i) const { return {ids(i), ids(i) + length(i)}; }
  // Sentence i's ids into `out` (resized), read from the file by pread, not through the map: a page touched
  // through the map is mapped with its neighbours (the kernel's fault-around, 64 KiB), so a batch of a few
  // hundred scattered sentences would add tens of MB to every rank's resident memory, and an epoch the
  // whole file.
  void read_ids(int64_t i, std::vector<int32_t>& out) const;
  // The lengths of sentences [first, first + n) into out[0, n). Read from the file, not through the map, so
  // a scan of every length (a batcher's plan) leaves none of the 8-byte offsets in this process's memory.
  void read_lengths(int64_t first, int64_t n, int32_t* out) const;

 private:
  void unmap();
  // Offsets [first, first + n) of the file into out, by pread.
  void read_offsets(uint64_t first, uint64_t n, uint64_t* out) const;
  // `bytes` bytes at file offset `at` into out, by pread; `what` names them in an error.
  void read_at(uint64_t at, size_t bytes, void* out, const char* what) const;
  std::string path_;
  int fd_ = -1;  // kept open: read_lengths reads the file that is mapped, even if another was renamed over it
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  uint64_t key_ = 0, count_ = 0, total_ = 0;
  const uint64_t* offsets_ = nullptr;
  const int32_t* ids_ = nullptr;
};

// Writes a token cache sentence by sentence, so a corpus of any size is
// encoded in bounded memory (the offsets, 8 bytes a sentence, stay in memory
// until finish()). The file appears at `path` only when finish() renames it
// there (tensor/atomic_file.h); a writer destroyed before that removes its temporary file.
class TokenCacheWriter {
 public:
  // `count`: the number of sentences that will be appended (it places the ids after the offsets).
  TokenCacheWriter(const std::string& path, uint64_t count);
  TokenCacheWriter(const TokenCacheWriter&) = delete;
  TokenCacheWriter& operator=(const TokenCacheWriter&) = delete;
  ~TokenCacheWriter();
  void append(const int32_t* ids, size_t n);
  uint64_t appended() const { return offsets_.size() - 1; }
  // Writes the offsets and the header and renames the file into place;
  // appended() must equal the count given to the constructor.
  void finish(uint64_t key, const FileIdentity& corpus);

 private:
  std::string path_;
  uint64_t count_;
  std::unique_ptr<AtomicFile> file_;
  std::vector<uint64_t> offsets_;
};

}  // namespace cmha::data
