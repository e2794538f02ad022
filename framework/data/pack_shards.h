#pragma once
// `cmha pack`: an ImageFolder split (<src>/<class>/<image>, as ImageNet's
// train/ and val/ are laid out once prepared) written as a folder of shards
// (data/image_shards.h). The samples are shuffled once (by `seed`) before
// they are cut into shards, so every shard mixes the classes and a training
// epoch's shard order and shuffle buffer suffice. With max_side > 0 an image
// whose shorter side is longer is decoded, resized (bicubic, antialiased, as
// the eval transform resizes) to that shorter side and re-encoded as JPEG at
// `quality`; the others keep their original bytes. The set's shards.json
// records max_side and quality, so a recipe can state what it was trained on.
#include <cstdint>
#include <functional>
#include <string>

#include "data/image_shards.h"

namespace cmha::data {

struct PackOptions {
  int64_t shard_samples = 1000;  // samples per shard (the last may hold fewer)
  int64_t max_side = 0;          // cap on the shorter side; 0 = copy the files' bytes
  int quality = 90;              // JPEG quality of re-encoded images
  uint64_t seed = 1;             // the shuffle before sharding
  bool skip_bad = false;         // with max_side: leave out (and count) images that do not decode
};

struct PackResult {
  ShardSetInfo set;
  int64_t reencoded = 0, skipped = 0;
  uint64_t bytes = 0;  // of all tars
};

// Writes <out>/shard-NNNNNN.{tar,idx} and <out>/shards.json (last, so a folder
// with a shards.json is complete). `progress` is called after each shard.
PackResult pack_image_folder(const std::string& src, const std::string& out, const PackOptions& options,
                             const std::function<void(const PackResult&)>& progress = {});

}  // namespace cmha::data
