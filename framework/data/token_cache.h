#pragma once
// Encoded sentences in a binary file that is memory-mapped, so epochs never
// tokenise again. Layout (little-endian):
//   64-byte header: magic "CMHATOK1", u32 format version, u32 bytes per id (4),
//                   u64 key, u64 sentences N, u64 ids in all, zero padding
//   u64 offsets[N + 1]   (sentence i is ids[offsets[i], offsets[i+1]))
//   i32 ids[...]
// The key says what the ids were made from (corpus bytes, SentencePiece model);
// a file whose key differs is stale and is rebuilt by the caller.
#include <cstdint>
#include <string>
#include <vector>

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
  static void write(const std::string& path, uint64_t key, const std::vector<std::vector<int32_t>>& sentences);
  // The key stored in `path`, or false when it is missing or not a cache file.
  static bool read_key(const std::string& path, uint64_t* key);

  const std::string& path() const { return path_; }
  uint64_t key() const { return key_; }
  int64_t size() const { return static_cast<int64_t>(count_); }
  int64_t total_ids() const { return static_cast<int64_t>(total_); }
  int64_t length(int64_t i) const { return static_cast<int64_t>(offsets_[i + 1] - offsets_[i]); }
  const int32_t* ids(int64_t i) const { return ids_ + offsets_[i]; }
  std::vector<int32_t> sentence(int64_t i) const { return {ids(i), ids(i) + length(i)}; }

 private:
  void unmap();
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  uint64_t key_ = 0, count_ = 0, total_ = 0;
  const uint64_t* offsets_ = nullptr;
  const int32_t* ids_ = nullptr;
};

}  // namespace cmha::data
