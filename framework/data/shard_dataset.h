#pragma once
// A folder of packed shards (data/image_shards.h) as an ImageDataset.
//
// Start-up reads shards.json and stats each shard's tar and index (no image
// is listed or statted); a shard or index that is missing, or an index of the
// wrong size, is one sentence naming it (exit 2). A shard's index is read the
// first time one of its samples is.
//
// Training order (epoch_order): the shards are permuted by (seed, epoch) and
// dealt round-robin to the ranks; each rank streams its shards in that order
// through a shuffle buffer of `shuffle_buffer` samples (seeded by seed, epoch
// and rank), so it reads its own shards front to back; the stream is cut, or
// wrapped around, to the loader's samples per rank. The order is computed,
// not drawn as the samples arrive, so it is the same whatever the number of
// loader workers and a checkpoint resumes at the same sample. Repeated
// augmentation puts each image `repeats` times into the rank's stream (the
// copies stay on one rank, unlike the folder loader's, which spreads them).
// Evaluation reads samples in the set's order by their index entries.
//
// Bad members: an image that is corrupt, or cut off by a truncated tar, is an
// Error from load() (the loader skips it and counts it: shards imply
// data.skip_bad_images); the first of each shard prints one warning, and
// bad_members() counts them all.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "data/image_dataset.h"
#include "data/image_shards.h"

namespace cmha::data {

class ShardDataset : public ImageDataset {
 public:
  // `num_classes` > 0: the set's classes must not outnumber it.
  ShardDataset(const std::string& dir, ColorMode mode, int64_t num_classes = 0,
               int64_t max_pixels = kDefaultMaxImagePixels, int64_t shuffle_buffer = 10000);
  ~ShardDataset() override;
  int64_t size() const override { return info_.samples; }
  int64_t num_classes() const override { return static_cast<int64_t>(info_.classes.size()); }
  int64_t label(int64_t i) const override;
  Image load(int64_t i) const override;
  std::string describe(int64_t i) const override;
  std::vector<int64_t> epoch_order(uint64_t seed, int64_t epoch, int rank, int world, int64_t count,
                                   int repeats) const override;

  const ShardSetInfo& info() const { return info_; }
  int64_t bad_members() const { return bad_.load(); }

 private:
  struct Shard;
  size_t shard_of(int64_t i) const;
  const std::vector<ShardMember>& members(size_t s) const;  // the shard's index, read once
  void count_bad(size_t s, const std::string& message) const;

  std::string dir_;
  ShardSetInfo info_;
  ColorMode mode_;
  int64_t max_pixels_, shuffle_buffer_;
  std::vector<int64_t> first_;  // first_[s]: the set's number of shard s's first sample
  std::vector<std::unique_ptr<Shard>> shards_;
  mutable std::atomic<int64_t> bad_{0};
};

}  // namespace cmha::data
