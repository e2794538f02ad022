#pragma once
// The image loader: a pool of worker threads decodes and augments whole
// batches ahead of the trainer into a bounded queue (at most `prefetch`
// batches ready or in flight), handed out in order. A batch is u8 pixels
// [B, C, S, S] (a quarter of f32's bytes) plus the draws of its pixel-wise
// augmentations (the erase rows, the mixup/CutMix decision); the training
// step's first op makes the model's f32 input of it on the training device
// (prepare_images, data/image_prepare.h: normalise, erase, mix).
//
// Memory: the pixels live in a fixed pool of prefetch + batches_held buffers
// (data/batch_buffer_pool.h; page-locked when a GPU is present), reused from
// batch to batch. A batch's buffer comes back when the last tensor viewing it
// dies, so a caller keeps at most `batches_held` batches alive at once (the
// trainer: the batch it trains on and the one it sends ahead; next() drops
// the batch it is handed first); one that keeps more makes next() fail with
// a sentence saying so (clone() a batch's tensors to keep them).
//
// Determinism: the epoch's order is a permutation keyed by (seed, epoch),
// the same on every rank; each sample's augmentation draws from a Philox
// stream keyed by (seed, epoch, its slot in the epoch's order) and each
// batch's mixup from one keyed by (seed, epoch, rank, batch index). A batch
// is therefore bit-identical for a seed whatever the number of workers
// (0 = decode in the calling thread).
//
// Sharding (training): rank r takes slots r, r + world, ... of the epoch's
// order, padded by wrapping around so every rank has ceil(N / world) samples
// and the same number of batches (drop_last drops a final partial batch).
// Repeated augmentation (DeiT's RASampler, repeats = 3): each image of the
// permutation is repeated `repeats` times before the sharding, so its copies
// land on different ranks with different augmentations; the epoch still has
// ceil(N / world) samples per rank (the first N / repeats images, each 3 times).
// Evaluation (shuffle = false): slots r, r + world, ... without padding.
//
// Bad images: a corrupt or unreadable file is a cmha::Error naming it,
// raised from next(); with skip_bad_images the sample is left out of its batch
// and counted (bad_images()); a batch whose samples are all bad is an error.
//
// Usage:
//   ImageLoader loader(dataset, options, seed, rank, world);
//   loader.start_epoch(epoch);
//   ImageBatch b;
//   while (loader.next(b)) {
//     Tensor x = model_input(b, device);  // [B, C, S, S] f32 on the training device
//     ... b.labels [B], b.targets ...
//   }
//   json s = loader.state();  ...  loader.restore(s);  // continues at the next batch
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "backend/image.h"
#include "data/batch_buffer_pool.h"
#include "data/image_dataset.h"
#include "data/image_transforms.h"
#include "data/mixup.h"
#include "tensor/tensor.h"

namespace cmha::data {

struct ImageLoaderOptions {
  int64_t batch_size = 128;
  bool training = true;         // train transforms, shuffling, padding; false = eval transforms, in order
  bool drop_last = false;       // training: drop a final partial batch
  int repeats = 1;              // repeated augmentation; 1 = off, DeiT uses 3
  int workers = 2;              // decoding threads; 0 = in the thread that calls next()
  int prefetch = 0;             // batches ready or in flight; 0 = 2 × workers
  bool skip_bad_images = false;
  bool pin_memory = false;      // images in page-locked memory (Storage::pinned_host): for a GPU
  int batches_held = 2;         // batches the caller keeps alive at once (its buffers: prefetch + this)
  ImageTransformOptions transform;
  MixupOptions mixup;           // training only; off unless mixup_alpha or cutmix_alpha > 0
};

struct ImageBatch {
  Tensor images;   // [B, C, S, S] u8: the resampled, augmented pixels, in one of the loader's buffers
  Tensor erase;    // [B, backend::kEraseFields] i64, each sample's random erasing (same buffer);
                   // undefined when the transforms do no erasing
  backend::ImagePrepareParams prepare;  // mean/std, the erase streams' key, the mixup/CutMix draw
  Tensor labels;   // [B] i64, the original labels
  Tensor targets;  // [B, num_classes] f32 soft targets when mixup/CutMix is on (label
                   // smoothing included), else undefined: then smooth in the loss
  std::vector<int64_t> indices;  // dataset index of each sample
  int64_t skipped = 0;           // bad images left out of this batch
};

// The batch's model input on `device`: its pixels and erase rows copied
// there, then prepare_images (data/image_prepare.h): [B, C, S, S] f32.
Tensor model_input(const ImageBatch& batch, Device device);

class ImageLoader {
 public:
  ImageLoader(std::shared_ptr<const ImageDataset> dataset, ImageLoaderOptions options, uint64_t seed, int rank = 0,
              int world = 1);
  ~ImageLoader();
  ImageLoader(const ImageLoader&) = delete;
  ImageLoader& operator=(const ImageLoader&) = delete;

  // Starts `epoch` at its first batch (stops the work of the previous one).
  void start_epoch(int64_t epoch);
  // The next batch of the epoch; false when the epoch is done.
  bool next(ImageBatch& batch);
  bool has_next() const { return epoch_ >= 0 && consumed_ < batches_per_epoch(); }
  int64_t batches_per_epoch() const;
  int64_t samples_per_epoch() const;  // this rank's
  int64_t epoch() const { return epoch_; }
  int64_t batch_index() const { return consumed_; }  // batches handed out this epoch
  int64_t bad_images() const;                       // skipped so far (all epochs)
  const ImageDataset& dataset() const { return *dataset_; }
  const ImageLoaderOptions& options() const { return opt_; }

  // {"epoch", "batch", "bad_images"}: restore() continues at the batch after the last one handed out.
  nlohmann::json state() const;
  void restore(const nlohmann::json& state);

  // Batch `index` of the current epoch, built in the calling thread (what
  // the workers run; tests compare it with the pooled result).
  ImageBatch build_batch(int64_t index) const;
  const BatchBufferPool& buffers() const { return *pool_; }

 private:
  struct Slot {
    int64_t sample;   // dataset index
    uint64_t stream;  // the sample's position in the epoch order (its random stream)
  };
  void plan_epoch(int64_t epoch);
  void stop_workers();
  void start_workers(int64_t first_batch);
  void worker_loop();
  ImageBatch build_batch(int64_t index, bool on_worker) const;
  // A buffer for a batch of C channels; on_worker: wait for one, else fail when none is free.
  std::shared_ptr<Storage> take_buffer(int64_t channels, bool on_worker) const;
  std::string held_message() const;

  std::shared_ptr<const ImageDataset> dataset_;
  ImageLoaderOptions opt_;
  uint64_t seed_;
  int rank_, world_;
  int64_t epoch_ = -1, consumed_ = 0;
  std::vector<Slot> slots_;  // this rank's samples of the epoch, in order

  // Worker pool state, guarded by mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_work_, cv_ready_;
  std::vector<std::thread> threads_;
  bool stopping_ = false;
  int64_t next_to_build_ = 0;  // the next batch a worker claims
  int building_ = 0;           // batches claimed and not yet ready or failed
  std::unique_ptr<BatchBufferPool> pool_;
  std::map<int64_t, ImageBatch> ready_;
  std::map<int64_t, std::exception_ptr> failed_;
  int64_t bad_images_ = 0;
};

}  // namespace cmha::data
