#pragma once
// Packed image shards, the WebDataset convention that timm and others read:
// an uncompressed POSIX tar per shard whose members come in pairs,
// NNNNNN.jpg (or .png) holding the encoded image and NNNNNN.cls its class
// index in ASCII, NNNNNN the sample's number in the set. A folder of shards:
//   shards.json          the set: format, classes (names, index = label),
//                        samples, each shard's file, samples and tar bytes,
//                        how the images were packed (max_side, quality)
//   shard-000000.tar     the members
//   shard-000000.idx     the shard's index, so a start lists and stats no
//                        image: "CMHASHI1", u64 count, then per sample
//                        u64 offset of its image bytes in the tar, u64 bytes,
//                        i64 label (little-endian; 16 + 24 · count bytes)
// `cmha pack` writes them (data/pack_shards.h); data/shard_dataset.h reads them.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/atomic_file.h"

namespace cmha::data {

struct ShardInfo {
  std::string file;  // the tar, relative to the set's folder; its index is the same name with .idx
  int64_t samples = 0;
  uint64_t tar_bytes = 0;
};

struct ShardSetInfo {
  std::vector<std::string> classes;
  std::vector<ShardInfo> shards;
  int64_t samples = 0;
  int64_t max_side = 0;  // the shorter side was capped at this (0: images kept as they were)
  int64_t quality = 0;   // JPEG quality of the re-encoded images (0: none re-encoded)
  std::string source;    // the folder packed
};

constexpr const char* kShardSetFile = "shards.json";

// <dir>/shards.json; a missing, unreadable or inconsistent one is an error naming it.
ShardSetInfo read_shard_set(const std::string& dir);
void write_shard_set(const std::string& dir, const ShardSetInfo& set);  // atomically
std::string shard_index_path(const std::string& tar_path);             // x.tar -> x.idx

struct ShardMember {
  uint64_t offset = 0, bytes = 0;  // the image's bytes in the tar
  int64_t label = 0;
};
// A shard's index; an unreadable, truncated or foreign file (or one of
// another count than `expected`, when >= 0) is an error naming it.
std::vector<ShardMember> read_shard_index(const std::string& path, int64_t expected = -1);

// Writes one shard: its tar and index appear (tensor/atomic_file.h) on finish().
class ShardWriter {
 public:
  explicit ShardWriter(std::string tar_path);
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;
  ~ShardWriter();  // removes the temporary files unless finished
  // `key` (e.g. "000123"); `ext` "jpg" or "png".
  void add(const std::string& key, const std::string& ext, const std::vector<uint8_t>& image, int64_t label);
  // The shard's size in bytes.
  uint64_t finish();

 private:
  void member(const std::string& name, const uint8_t* data, size_t n);
  std::string path_;
  std::unique_ptr<AtomicFile> file_;
  uint64_t at_ = 0;
  std::vector<ShardMember> index_;
};

}  // namespace cmha::data
