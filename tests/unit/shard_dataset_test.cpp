// Packed image shards (data/image_shards.h, data/pack_shards.h,
// data/shard_dataset.h): `cmha pack` of an ImageFolder into tar shards that
// tar itself lists, the same images and labels read back, re-encoding with
// the shorter side capped, the training order (shards × shuffle buffer,
// seeded, per rank), a loader resumed at the same sample, bad members skipped
// with one counted warning per shard, and a missing shard as one sentence and
// exit 2.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "data/image.h"
#include "data/image_loader.h"
#include "data/pack_shards.h"
#include "data/shard_dataset.h"
#include "support/check.h"
#include "support/text.h"
#include "support/tiny_images.h"
#include "tensor/error.h"
#include "support/source_paths.h"

using namespace cmha;
using test::error_of;
namespace fs = std::filesystem;

namespace {

using cmha::test::has;

// <dir>/src/<class>/<k>.jpg: `classes` classes of `per_class` images, 24–60 px a side, each a flat colour that
// names it (red = class, green = k), so an image read back says where it came from.
std::string write_folder(const std::string& dir, int classes, int per_class) {
  const std::string src = dir + "/src";
  for (int c = 0; c < classes; ++c) {
    fs::create_directories(src + "/class" + std::to_string(c));
    for (int k = 0; k < per_class; ++k) {
      data::Image im(24 + (k * 7) % 37, 24 + (c * 11 + k * 5) % 37, 3);
      for (int64_t p = 0; p < im.height * im.width; ++p) {
        im.pixels[p * 3] = static_cast<uint8_t>(40 * c + 20);
        im.pixels[p * 3 + 1] = static_cast<uint8_t>(10 * k + 5);
        im.pixels[p * 3 + 2] = 128;
      }
      data::write_file(src + "/class" + std::to_string(c) + "/" + std::to_string(k) + ".jpg",
                       data::encode_jpeg(im, 95));
    }
  }
  return src;
}

// (class, k) from an image's colour (red 40 c + 20, green 10 k + 5, give or take JPEG's rounding).
std::pair<int, int> origin(const data::Image& im) {
  const uint8_t* p = im.at(im.height / 2, im.width / 2);
  return {p[0] / 40, p[1] / 10};
}

using cmha::test::same_values;

std::string shell_output(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  char buf[4096];
  size_t n;
  while (p && (n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (p) ::pclose(p);
  return out;
}

}  // namespace

TEST(Shards, PackWritesTarShardsThatReadBackAsTheFolder) {
  const std::string dir = test::temp_dir("shards_pack");
  const std::string src = write_folder(dir, 3, 7);  // 21 images
  data::PackOptions o;
  o.shard_samples = 4;
  const data::PackResult r = data::pack_image_folder(src, dir + "/out", o);
  EXPECT_EQ(r.set.samples, 21);
  ASSERT_EQ(r.set.shards.size(), 6u);  // 5 × 4 + 1
  EXPECT_EQ(r.set.shards.back().samples, 1);
  EXPECT_EQ(r.reencoded, 0);
  EXPECT_EQ(r.set.classes, (std::vector<std::string>{"class0", "class1", "class2"}));
  // WebDataset's convention, as tar lists it: key.jpg then key.cls, keys numbering the set.
  const std::string listing = shell_output("tar -tf " + dir + "/out/shard-000001.tar");
  EXPECT_EQ(listing, "000004.jpg\n000004.cls\n000005.jpg\n000005.cls\n000006.jpg\n000006.cls\n000007.jpg\n000007.cls\n");
  const data::ShardDataset shards(dir + "/out", data::ColorMode::rgb);
  ASSERT_EQ(shards.size(), 21);
  EXPECT_EQ(shards.num_classes(), 3);
  std::set<std::pair<int, int>> seen;
  std::map<int, int> shard0_classes;
  for (int64_t i = 0; i < shards.size(); ++i) {
    const data::Image im = shards.load(i);
    const auto [c, k] = origin(im);
    EXPECT_EQ(shards.label(i), c) << shards.describe(i);
    EXPECT_TRUE(seen.insert({c, k}).second) << "twice: class " << c << " image " << k;
    // The .cls member says the same as the index.
    const std::string key = shards.describe(i).substr(shards.describe(i).size() - 6);
    EXPECT_EQ(shell_output("tar -xOf " + dir + "/out/shard-" + std::string(6 - std::to_string(i / 4).size(), '0') +
                  std::to_string(i / 4) + ".tar " + key + ".cls"),
              std::to_string(c));
    if (i < 4) ++shard0_classes[c];
  }
  EXPECT_EQ(seen.size(), 21u);
  EXPECT_GE(shard0_classes.size(), 2u);  // shuffled before sharding: a shard mixes the classes
  // A second pack into the same folder is refused.
  EXPECT_TRUE(has(error_of([&] { data::pack_image_folder(src, dir + "/out", o); }), "pack into an empty folder"));
  fs::remove_all(dir);
}

TEST(Shards, MaxSideReencodesOnlyLargerImagesAndIsRecorded) {
  const std::string dir = test::temp_dir("shards_max_side");
  const std::string src = write_folder(dir, 2, 6);
  data::PackOptions o;
  o.max_side = 30;
  o.quality = 85;
  const data::PackResult r = data::pack_image_folder(src, dir + "/out", o);
  const data::ShardDataset shards(dir + "/out", data::ColorMode::rgb);
  EXPECT_EQ(shards.info().max_side, 30);
  EXPECT_EQ(shards.info().quality, 85);
  int64_t capped = 0;
  for (int64_t i = 0; i < shards.size(); ++i) {
    const data::Image im = shards.load(i);
    EXPECT_LE(std::min(im.height, im.width), 30) << shards.describe(i);
    capped += std::min(im.height, im.width) == 30;
    EXPECT_EQ(shards.label(i), origin(im).first);
  }
  EXPECT_GT(r.reencoded, 0);
  EXPECT_LT(r.reencoded, 12);
  EXPECT_GE(capped, r.reencoded);
  fs::remove_all(dir);
}

TEST(Shards, TrainingOrderIsShardsThroughABufferSeededPerRank) {
  const std::string dir = test::temp_dir("shards_order");
  data::PackOptions o;
  o.shard_samples = 5;
  data::pack_image_folder(write_folder(dir, 4, 10), dir + "/out", o);  // 40 samples, 8 shards
  const data::ShardDataset shards(dir + "/out", data::ColorMode::rgb, 0, data::kDefaultMaxImagePixels, 6);
  const auto r0 = shards.epoch_order(7, 0, 0, 2, 20, 1), r1 = shards.epoch_order(7, 0, 1, 2, 20, 1);
  // The two ranks split the set: each reads 4 whole shards, no sample twice.
  std::set<int64_t> all(r0.begin(), r0.end());
  all.insert(r1.begin(), r1.end());
  EXPECT_EQ(all.size(), 40u);
  std::set<int64_t> shards0;
  for (int64_t i : r0) shards0.insert(i / 5);
  EXPECT_EQ(shards0.size(), 4u);
  // Seeded: the same again, another epoch or seed another order; within a rank the buffer mixes its shards
  // (a sample leaves at most buffer + its place in the stream later, never before its shard is read).
  EXPECT_EQ(shards.epoch_order(7, 0, 0, 2, 20, 1), r0);
  EXPECT_NE(shards.epoch_order(7, 1, 0, 2, 20, 1), r0);
  EXPECT_NE(shards.epoch_order(8, 0, 0, 2, 20, 1), r0);
  std::vector<int64_t> sorted = r0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(sorted, r0);
  // Repeated augmentation: each image `repeats` times in the rank's stream; a short share wraps around.
  const auto rep = shards.epoch_order(7, 0, 0, 2, 20, 3);
  std::map<int64_t, int> copies;
  for (int64_t i : rep) ++copies[i];
  EXPECT_EQ(rep.size(), 20u);
  EXPECT_LT(copies.size(), 20u);
  const auto wrapped = shards.epoch_order(7, 0, 0, 2, 30, 1);
  EXPECT_EQ(wrapped.size(), 30u);
  EXPECT_EQ(std::vector<int64_t>(wrapped.begin() + 20, wrapped.end()), std::vector<int64_t>(r0.begin(), r0.begin() + 10));
  fs::remove_all(dir);
}

TEST(Shards, LoaderResumesAtTheSameSample) {
  const std::string dir = test::temp_dir("shards_resume");
  data::PackOptions o;
  o.shard_samples = 6;
  data::pack_image_folder(write_folder(dir, 3, 10), dir + "/out", o);
  auto shards = std::make_shared<data::ShardDataset>(dir + "/out", data::ColorMode::rgb, 0,
                                                     data::kDefaultMaxImagePixels, 8);
  data::ImageLoaderOptions lo;
  lo.batch_size = 4;
  lo.workers = 2;
  lo.skip_bad_images = true;
  lo.transform.image_size = 16;
  lo.transform.mean = {0.5f, 0.5f, 0.5f};
  lo.transform.std = {0.25f, 0.25f, 0.25f};
  data::ImageLoader a(shards, lo, 11, 0, 2);
  a.start_epoch(1);
  data::ImageBatch b;
  ASSERT_TRUE(a.next(b));
  ASSERT_TRUE(a.next(b));
  const nlohmann::json state = a.state();
  ASSERT_TRUE(a.next(b));
  lo.workers = 0;  // another worker count: the same samples
  data::ImageLoader resumed(shards, lo, 11, 0, 2);
  resumed.restore(state);
  data::ImageBatch c;
  ASSERT_TRUE(resumed.next(c));
  EXPECT_EQ(c.indices, b.indices);
  EXPECT_TRUE(same_values(c.images, b.images));
  fs::remove_all(dir);
}

TEST(Shards, BadMembersAreSkippedWithOneCountedWarningPerShard) {
  const std::string dir = test::temp_dir("shards_bad");
  data::PackOptions o;
  o.shard_samples = 5;
  data::pack_image_folder(write_folder(dir, 2, 10), dir + "/out", o);  // 20 samples, 4 shards
  // Shard 0: two members overwritten with garbage; shard 2: cut in the middle of its third member.
  const auto index0 = data::read_shard_index(dir + "/out/shard-000000.idx");
  const auto index2 = data::read_shard_index(dir + "/out/shard-000002.idx");
  {
    std::fstream f(dir + "/out/shard-000000.tar", std::ios::in | std::ios::out | std::ios::binary);
    for (int k : {1, 3}) {
      f.seekp(static_cast<std::streamoff>(index0[k].offset));
      const std::string junk(static_cast<size_t>(index0[k].bytes), 'x');
      f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    }
  }
  fs::resize_file(dir + "/out/shard-000002.tar", index2[2].offset + index2[2].bytes / 2);
  testing::internal::CaptureStderr();
  auto shards = std::make_shared<data::ShardDataset>(dir + "/out", data::ColorMode::rgb);
  data::ImageLoaderOptions lo;
  lo.batch_size = 5;
  lo.workers = 2;
  lo.skip_bad_images = true;  // what data.format=shards sets
  lo.training = false;
  lo.transform.image_size = 16;
  lo.transform.eval_resize = 16;
  lo.transform.mean = {0.5f, 0.5f, 0.5f};
  lo.transform.std = {0.25f, 0.25f, 0.25f};
  data::ImageLoader loader(shards, lo, 1);
  loader.start_epoch(0);
  data::ImageBatch b;
  int64_t images = 0;
  while (loader.next(b)) images += b.images.size(0);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(shards->bad_members(), 5);  // 2 in shard 0, 3 cut off in shard 2
  EXPECT_EQ(loader.bad_images(), 5);
  EXPECT_EQ(images, 15);
  size_t warnings = 0;
  for (size_t at = 0; (at = err.find("data: warning:", at)) != std::string::npos; ++at) ++warnings;
  EXPECT_EQ(warnings, 3u) << err;  // the short tar at start, then one per shard with bad members
  EXPECT_TRUE(has(err, "shard-000000.tar member 000001")) << err;
  EXPECT_TRUE(has(err, "shard-000002.tar member 000012 is cut off")) << err;
  fs::remove_all(dir);
}

TEST(Shards, MissingShardIsOneSentenceAndExitTwo) {
  const std::string dir = test::temp_dir("shards_missing");
  const std::string src = write_folder(dir, 10, 3);
  // The CLI packs (both splits from the same folder: this test is about their files).
  test::CommandResult r = test::run_cmha("pack " + src + " " + dir + "/data/train --shard-samples 8");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "packed 30 samples of 10 classes into 4 shards")) << r.output;
  r = test::run_cmha("pack " + src + " " + dir + "/data/val --shard-samples 8");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string train = std::string(CMHA_SOURCE_DIR) + "/recipes/local/fashion_mnist_vit.yaml " +
                            "data.format=shards data.holdout=0 data.root=" + dir + "/data data.batch_size=8 data.eval_resize=28 "
                            "model.d_model=16 model.depth=1 model.ffn_dim=32 model.attention.heads=2 "
                            "model.attention.key_dim=8 train.max_updates=2 train.max_epochs=0 lr.warmup_epochs=0 lr.warmup=1 train.save_dir=" +
                            dir + "/run";
  r = test::run_cmha("train " + train);
  ASSERT_EQ(r.code, 0) << r.output;
  // The recipe states what the shards were packed with.
  r = test::run_cmha("train " + train + " --overwrite data.shard_max_side=320");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "data.shard_max_side is 320 but the shards of " + dir +
                                "/data/train were packed with --max-side 0"))
      << r.output;
  fs::remove(dir + "/data/train/shard-000002.tar");
  r = test::run_cmha("train " + train + " --overwrite");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "cmha: shard '" + dir + "/data/train/shard-000002.tar' listed in " + dir +
                                "/data/train/shards.json is missing\n"))
      << r.output;
  fs::remove_all(dir);
}
