// ImageFolder / IDX datasets and the threaded image loader: determinism
// whatever the worker count, sharding, repeated augmentation, resume and
// bad-input errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <unistd.h>

#include "data/idx.h"
#include "data/image_loader.h"
#include "data/image_prepare.h"
#include "support/check.h"

namespace cmha::data {
namespace {

namespace fs = std::filesystem;

// A fresh folder under the temp dir, removed at the end of the test.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / ("cmha_" + tag + "_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// root/<class>/<i>.png (and one .jpg): tiny images whose pixels encode (class, i).
void write_folder(const fs::path& root, const std::vector<int>& counts) {
  for (size_t k = 0; k < counts.size(); ++k) {
    const fs::path dir = root / ("class" + std::to_string(k));
    fs::create_directories(dir);
    for (int i = 0; i < counts[k]; ++i) {
      Image im(10 + i % 3, 12, 3);
      for (size_t p = 0; p < im.pixels.size(); ++p) im.pixels[p] = static_cast<uint8_t>(k * 60 + i * 7 + p % 50);
      if (i == 0)
        write_file((dir / "0.jpg").string(), encode_jpeg(im));
      else
        write_file((dir / (std::to_string(i) + ".png")).string(), encode_png(im));
    }
    write_file((dir / "notes.txt").string(), {'x'});  // ignored
  }
}

ImageLoaderOptions train_options(int workers) {
  ImageLoaderOptions o;
  o.batch_size = 4;
  o.workers = workers;
  o.transform.image_size = 8;
  o.transform.rand_augment = true;
  o.transform.rand_augment_config = parse_rand_augment("rand-m9-mstd0.5-inc1");
  o.transform.random_erasing = 0.25f;
  o.mixup.mixup_alpha = 0.8f;
  o.mixup.cutmix_alpha = 1.0f;
  return o;
}

// A batch kept past the next one: its tensors copied out of the loader's
// buffers, and the model input it makes (prepared on the CPU).
struct KeptBatch {
  ImageBatch batch;
  Tensor input;  // [B, C, S, S] f32
};
KeptBatch keep(const ImageBatch& b) {
  KeptBatch k{b, model_input(b, Device::cpu())};
  k.batch.images = b.images.clone();
  if (b.erase.defined()) k.batch.erase = b.erase.clone();
  return k;
}

std::vector<KeptBatch> whole_epoch(ImageLoader& loader, int64_t epoch) {
  loader.start_epoch(epoch);
  std::vector<KeptBatch> out;
  ImageBatch b;
  while (loader.next(b)) out.push_back(keep(b));
  return out;
}

void expect_same(const std::vector<KeptBatch>& a, const std::vector<KeptBatch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].batch.indices, b[i].batch.indices) << "batch " << i;
    EXPECT_EQ(a[i].batch.images.to_float_vector(), b[i].batch.images.to_float_vector()) << "batch " << i;
    EXPECT_EQ(a[i].input.to_float_vector(), b[i].input.to_float_vector()) << "batch " << i;
    EXPECT_EQ(a[i].batch.targets.to_float_vector(), b[i].batch.targets.to_float_vector()) << "batch " << i;
  }
}

TEST(ImageFolder, ClassesAreSortedFoldersAndLabelsTheirIndices) {
  TempDir dir("folder");
  write_folder(dir.path, {3, 2, 4});
  ImageFolderDataset ds(dir.path.string(), ColorMode::rgb);
  EXPECT_EQ(ds.num_classes(), 3);
  EXPECT_EQ(ds.size(), 9);
  EXPECT_EQ(ds.classes(), (std::vector<std::string>{"class0", "class1", "class2"}));
  EXPECT_EQ(ds.label(0), 0);
  EXPECT_EQ(ds.label(3), 1);
  EXPECT_EQ(ds.label(8), 2);
  EXPECT_EQ(ds.load(4).channels, 3);
  EXPECT_EQ(ImageFolderDataset(dir.path.string(), ColorMode::grey).load(4).channels, 1);
}

TEST(ImageFolder, EmptyClassMissingRootAndTooManyClassesAreErrors) {
  TempDir dir("folder_bad");
  write_folder(dir.path, {2, 2});
  try {
    ImageFolderDataset(dir.path.string(), ColorMode::rgb, 1);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 class folders, more than the 1"), std::string::npos) << e.what();
  }
  fs::create_directories(dir.path / "class9");
  try {
    ImageFolderDataset(dir.path.string(), ColorMode::rgb);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir.path / "class9").string() + ": empty class folder"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ImageFolderDataset((dir.path / "nope").string(), ColorMode::rgb), Error);
}

TEST(IdxImages, DatasetChecksLabelsAndReplicatesGrey) {
  TempDir dir("idx");
  const std::string images = (dir.path / "img").string(), labels = (dir.path / "lab").string();
  write_idx_u8(images, {3, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, false);
  write_idx_u8(labels, {3}, {1, 0, 4}, false);
  IdxImageDataset ds(images, labels, ColorMode::rgb, 5);
  EXPECT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.label(2), 4);
  const Image im = ds.load(1);
  EXPECT_EQ(im.channels, 3);
  EXPECT_EQ(im.pixels, (std::vector<uint8_t>{4, 4, 4, 5, 5, 5, 6, 6, 6, 7, 7, 7}));
  try {
    IdxImageDataset(images, labels, ColorMode::grey, 4);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), labels + ": label 4 of sample 2 is outside the 4 classes");
  }
}

TEST(ImageLoader, BatchesAreTheSameForAnyWorkerCount) {
  TempDir dir("loader_workers");
  write_folder(dir.path, {5, 4, 4});
  auto ds = std::make_shared<ImageFolderDataset>(dir.path.string(), ColorMode::rgb);
  ImageLoader serial(ds, train_options(0), 7), one(ds, train_options(1), 7), three(ds, train_options(3), 7);
  const auto a = whole_epoch(serial, 2);
  ASSERT_EQ(a.size(), 4u);  // 13 samples in batches of 4
  EXPECT_EQ(a.back().batch.images.size(0), 1);
  EXPECT_EQ(a[0].batch.images.shape(), (Shape{4, 3, 8, 8}));
  EXPECT_EQ(a[0].batch.images.dtype(), DType::u8);
  EXPECT_EQ(a[0].input.dtype(), DType::f32);
  EXPECT_EQ(a[0].batch.targets.shape(), (Shape{4, 3}));
  expect_same(a, whole_epoch(one, 2));
  expect_same(a, whole_epoch(three, 2));
  // Another epoch is another order and other augmentations.
  const auto b = whole_epoch(serial, 3);
  EXPECT_NE(a[0].batch.images.to_float_vector(), b[0].batch.images.to_float_vector());
  std::multiset<int64_t> seen;
  for (const auto& kept : b) seen.insert(kept.batch.indices.begin(), kept.batch.indices.end());
  EXPECT_EQ(seen.size(), 13u);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 13u);  // a permutation
}

TEST(ImageLoader, RanksGetEqualBatchCountsAndRepeatsSpreadAcrossRanks) {
  TempDir dir("loader_ranks");
  write_folder(dir.path, {4, 3});
  auto ds = std::make_shared<ImageFolderDataset>(dir.path.string(), ColorMode::rgb);
  ImageLoaderOptions o = train_options(0);
  o.mixup = {};
  std::multiset<int64_t> all;
  for (int rank = 0; rank < 3; ++rank) {
    ImageLoader loader(ds, o, 5, rank, 3);
    EXPECT_EQ(loader.samples_per_epoch(), 3);  // ceil(7 / 3), padded by wrapping around
    const auto batches = whole_epoch(loader, 0);
    EXPECT_EQ(static_cast<int64_t>(batches.size()), loader.batches_per_epoch());
    EXPECT_EQ(batches.size(), 1u);
    EXPECT_FALSE(batches[0].batch.targets.defined());  // no mixup: smoothing is the loss's
    all.insert(batches[0].batch.indices.begin(), batches[0].batch.indices.end());
  }
  EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()).size(), 7u);  // every image, 2 twice
  // Repeated augmentation over 3 ranks: each image's 3 copies go to the 3 ranks,
  // each with its own augmentation; an epoch still has ceil(7 / 3) samples per rank.
  o.repeats = 3;
  o.transform.rand_augment = false;
  o.transform.random_erasing = 0;
  std::vector<ImageBatch> per_rank;
  for (int rank = 0; rank < 3; ++rank) {
    ImageLoader loader(ds, o, 5, rank, 3);
    per_rank.push_back(whole_epoch(loader, 0)[0].batch);
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(per_rank[0].indices[i], per_rank[1].indices[i]);
    EXPECT_EQ(per_rank[0].indices[i], per_rank[2].indices[i]);
  }
  const int64_t per = 3 * 8 * 8;
  const auto x0 = per_rank[0].images.to_float_vector(), x1 = per_rank[1].images.to_float_vector();
  EXPECT_NE(std::vector<float>(x0.begin(), x0.begin() + per), std::vector<float>(x1.begin(), x1.begin() + per));
}

TEST(ImageLoader, StateRestoresTheNextBatch) {
  TempDir dir("loader_state");
  write_folder(dir.path, {6, 6});
  auto ds = std::make_shared<ImageFolderDataset>(dir.path.string(), ColorMode::rgb);
  ImageLoader loader(ds, train_options(2), 3);
  const auto full = whole_epoch(loader, 1);
  loader.start_epoch(1);
  ImageBatch b;
  ASSERT_TRUE(loader.next(b));
  const nlohmann::json state = loader.state();
  EXPECT_EQ(state.at("epoch"), 1);
  EXPECT_EQ(state.at("batch"), 1);
  ImageLoader resumed(ds, train_options(1), 3);
  resumed.restore(state);
  std::vector<KeptBatch> rest;
  while (resumed.has_next()) {
    ASSERT_TRUE(resumed.next(b));
    rest.push_back(keep(b));
  }
  EXPECT_FALSE(resumed.next(b));
  expect_same(std::vector<KeptBatch>(full.begin() + 1, full.end()), rest);
}

TEST(ImageLoader, EvalIsInOrderAndUnaugmented) {
  TempDir dir("loader_eval");
  write_folder(dir.path, {3, 2});
  auto ds = std::make_shared<ImageFolderDataset>(dir.path.string(), ColorMode::grey);
  ImageLoaderOptions o;
  o.training = false;
  o.batch_size = 2;
  o.workers = 1;
  o.transform.image_size = 8;
  o.transform.eval_resize = 9;
  o.transform.mean = {0.5f};
  o.transform.std = {0.25f};
  ImageLoader loader(ds, o, 1, 1, 2);  // rank 1 of 2: samples 1 and 3
  const auto batches = whole_epoch(loader, 0);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].batch.indices, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(batches[0].batch.labels.to_i64_vector(), (std::vector<int64_t>{0, 1}));
  EXPECT_FALSE(batches[0].batch.erase.defined());
  std::vector<uint8_t> pixels(64);
  to_chw(center_crop(resize_shorter_side(ds->load(3), 9), 8, 8), pixels.data());
  const auto got = batches[0].batch.images.to_float_vector(), input = batches[0].input.to_float_vector();
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(got[64 + i], pixels[i]) << i;
    EXPECT_EQ(input[64 + i], (pixels[i] / 255.0f - 0.5f) * (1.0f / 0.25f)) << i;  // normalised by the step
  }
}

TEST(ImageLoader, BadImageIsAnErrorNamingItOrSkippedAndCounted) {
  TempDir dir("loader_bad");
  write_folder(dir.path, {3, 3});
  const std::string bad = (dir.path / "class1" / "2.png").string();
  write_file(bad, {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0});
  auto ds = std::make_shared<ImageFolderDataset>(dir.path.string(), ColorMode::rgb);
  ImageLoaderOptions o = train_options(2);
  o.batch_size = 6;
  ImageLoader strict(ds, o, 1);
  strict.start_epoch(0);
  ImageBatch b;
  for (int attempt = 0; attempt < 2; ++attempt) {  // asking again raises it again (and does not hang)
    try {
      strict.next(b);
      ADD_FAILURE();
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(bad + ": corrupt PNG image", 0), 0u) << e.what();
    }
  }
  o.skip_bad_images = true;
  ImageLoader lenient(ds, o, 1);
  lenient.start_epoch(0);
  ASSERT_TRUE(lenient.next(b));
  EXPECT_EQ(b.images.size(0), 5);
  EXPECT_EQ(b.skipped, 1);
  EXPECT_EQ(lenient.bad_images(), 1);
  EXPECT_EQ(lenient.state().at("bad_images"), 1);
}

TEST(ImageLoader, BatchesAreU8InAFixedPoolOfBuffers) {
  TempDir dir("loader_pool");
  write_folder(dir.path, {9, 8});
  auto ds = std::make_shared<ImageFolderDataset>(dir.path.string(), ColorMode::rgb);
  for (const int workers : {0, 2}) {
    ImageLoader loader(ds, train_options(workers), 4);
    const int capacity = loader.buffers().capacity();
    EXPECT_EQ(capacity, (workers == 0 ? 1 : 2 * workers) + 2);  // prefetch + batches_held
    ImageBatch b, ahead;
    for (int64_t epoch = 0; epoch < 4; ++epoch) {
      loader.start_epoch(epoch);
      // As the trainer holds them: the batch it trains on and the one it sent ahead.
      while (loader.next(b)) {
        EXPECT_EQ(b.images.dtype(), DType::u8);
        EXPECT_EQ(b.images.size(1), 3);
        EXPECT_EQ(b.images.size(2), 8);
        EXPECT_EQ(b.erase.dtype(), DType::i64);
        EXPECT_EQ(b.erase.shape(), (Shape{b.images.size(0), backend::kEraseFields}));
        EXPECT_EQ(b.images.nbytes(), static_cast<size_t>(b.images.size(0)) * 3 * 8 * 8);  // a quarter of f32's
        std::swap(b, ahead);
      }
      // One block per buffer, made when it was first used (17 samples: 5 batches an epoch).
      EXPECT_LE(loader.buffers().allocations(), capacity) << "workers " << workers << ", epoch " << epoch;
    }
    // Buffers are made lazily, up to the pool's capacity, when the workers run
    // that far ahead (a slow, sanitized build reaches more of them later): never
    // more, however many batches follow.
    loader.start_epoch(9);
    while (loader.next(b)) std::swap(b, ahead);
    EXPECT_LE(loader.buffers().allocations(), capacity) << "nothing allocated past the pool's capacity";
  }
}

TEST(ImageLoader, KeepingMoreBatchesThanHeldIsAnError) {
  TempDir dir("loader_held");
  write_folder(dir.path, {20, 20});  // 10 batches: more than any pool here
  auto ds = std::make_shared<ImageFolderDataset>(dir.path.string(), ColorMode::rgb);
  for (const int workers : {0, 1, 2}) {
    ImageLoader loader(ds, train_options(workers), 4);
    loader.start_epoch(0);
    std::vector<ImageBatch> kept;  // their tensors view the loader's buffers
    ImageBatch b;
    const std::string msg = test::error_of([&] {
      while (loader.next(b)) kept.push_back(b);
    });
    EXPECT_EQ(msg, "image loader: every one of its " + std::to_string(loader.buffers().capacity()) +
                       " batch buffers is held by batches still alive: keep at most 2 batches at once "
                       "(ImageLoaderOptions::batches_held), or clone() what you keep")
        << "workers " << workers;
    // Letting them go resumes the epoch where it stopped.
    const int64_t at = loader.batch_index();
    kept.clear();
    b = ImageBatch{};
    EXPECT_TRUE(loader.next(b)) << "workers " << workers;
    EXPECT_EQ(loader.batch_index(), at + 1);
  }
}

}  // namespace
}  // namespace cmha::data
