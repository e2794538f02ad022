#include "data/image_loader.h"

#include <algorithm>
#include <numeric>

#include "data/image_prepare.h"
#include "tensor/device.h"
#include "tensor/emulated_stream.h"
#include "tensor/error.h"

namespace cmha::data {

namespace {
// Random-stream domains, so the order, the samples and the mixup never share numbers.
constexpr uint32_t kOrderDomain = 1, kSampleDomain = 2, kMixDomain = 3;
}  // namespace

Tensor model_input(const ImageBatch& b, Device device) {
  return prepare_images(b.images.to(device), b.erase.defined() ? b.erase.to(device) : Tensor(), b.prepare);
}

ImageLoader::ImageLoader(std::shared_ptr<const ImageDataset> dataset, ImageLoaderOptions options, uint64_t seed,
                         int rank, int world)
    : dataset_(std::move(dataset)), opt_(std::move(options)), seed_(seed), rank_(rank), world_(world) {
  CMHA_CHECK(dataset_ && dataset_->size() > 0, "image loader: the dataset is empty");
  CMHA_CHECK(world_ >= 1 && rank_ >= 0 && rank_ < world_,
             "image loader: rank " + std::to_string(rank_) + " of world " + std::to_string(world_));
  CMHA_CHECK(opt_.batch_size >= 1, "image loader: batch size " + std::to_string(opt_.batch_size));
  CMHA_CHECK(opt_.repeats >= 1, "image loader: repeats " + std::to_string(opt_.repeats) + " (1 = off)");
  CMHA_CHECK(opt_.workers >= 0, "image loader: workers " + std::to_string(opt_.workers));
  if (opt_.prefetch <= 0) opt_.prefetch = std::max(2 * opt_.workers, 1);
  CMHA_CHECK(opt_.batches_held >= 1, "image loader: batches_held " + std::to_string(opt_.batches_held));
  pool_ = std::make_unique<BatchBufferPool>(opt_.prefetch + opt_.batches_held, opt_.pin_memory);
  // A worker that starts waiting for a buffer may leave next() waiting on nothing: it looks again.
  pool_->set_on_wait([this] {
    std::lock_guard<std::mutex> lock(mu_);
    cv_ready_.notify_all();
  });
  CMHA_CHECK(opt_.training || opt_.transform.eval_resize >= opt_.transform.image_size,
             "image loader: the eval resize " + std::to_string(opt_.transform.eval_resize) +
                 " is smaller than the crop " + std::to_string(opt_.transform.image_size));
}

ImageLoader::~ImageLoader() { stop_workers(); }

int64_t ImageLoader::samples_per_epoch() const {
  const int64_t N = dataset_->size();
  return opt_.training ? (N + world_ - 1) / world_ : (N - rank_ + world_ - 1) / world_;
}

int64_t ImageLoader::batches_per_epoch() const {
  const int64_t n = samples_per_epoch();
  return opt_.training && opt_.drop_last ? n / opt_.batch_size : (n + opt_.batch_size - 1) / opt_.batch_size;
}

void ImageLoader::plan_epoch(int64_t epoch) {
  epoch_ = epoch;
  consumed_ = 0;
  slots_.clear();
  const int64_t N = dataset_->size();
  if (!opt_.training) {
    for (int64_t i = rank_; i < N; i += world_) slots_.push_back({i, static_cast<uint64_t>(i)});
    return;
  }
  const int64_t per_rank = (N + world_ - 1) / world_, total = N * opt_.repeats;
  // A dataset read as a stream (packed shards) orders its epoch itself; the slot's position keys its randomness.
  const std::vector<int64_t> own = dataset_->epoch_order(seed_, epoch, rank_, world_, per_rank, opt_.repeats);
  if (!own.empty()) {
    CMHA_CHECK(static_cast<int64_t>(own.size()) == per_rank, "image loader: the dataset's epoch order has " +
                                                                 std::to_string(own.size()) + " samples, not " +
                                                                 std::to_string(per_rank));
    for (int64_t i = 0; i < per_rank; ++i) slots_.push_back({own[i], static_cast<uint64_t>(rank_ + i * world_)});
    return;
  }
  // The epoch's permutation (Fisher-Yates on the order stream), the same on every rank.
  std::vector<int64_t> perm(N);
  std::iota(perm.begin(), perm.end(), 0);
  SampleRandom order(seed_, epoch, 0, kOrderDomain);
  for (int64_t i = N - 1; i > 0; --i) std::swap(perm[i], perm[order.integer(0, i + 1)]);
  // Position p of the (repeated, wrapped-around) list is image perm[(p / repeats) mod (N · repeats)];
  // rank r takes positions r, r + world, ...; the position keys the sample's randomness.
  for (int64_t i = 0; i < per_rank; ++i) {
    const int64_t p = rank_ + i * world_;
    slots_.push_back({perm[(p % total) / opt_.repeats], static_cast<uint64_t>(p)});
  }
}

namespace {
// The batch buffer's layout: the pixels [B, C, S, S] u8, then (when the
// transforms erase) the erase rows [B, kEraseFields] i64 at an 8-byte boundary.
size_t erase_offset(int64_t B, int64_t C, int64_t S) { return (static_cast<size_t>(B * C * S * S) + 7) / 8 * 8; }
}  // namespace

std::shared_ptr<Storage> ImageLoader::take_buffer(int64_t C, bool on_worker) const {
  const int64_t B = opt_.batch_size, S = opt_.transform.image_size;
  const bool erasing = opt_.training && opt_.transform.random_erasing > 0;
  const size_t nbytes = erase_offset(B, C, S) + (erasing ? static_cast<size_t>(B * backend::kEraseFields) * 8 : 0);
  std::shared_ptr<Storage> buffer = pool_->acquire(nbytes, on_worker);
  if (!buffer && !on_worker && cuda_emulated_async()) {
    // The emulated GPU's queued copies may still hold buffers the caller let go.
    emulated_drain();
    buffer = pool_->acquire(nbytes, false);
  }
  if (!buffer) throw Error(on_worker ? "image loader: stopped" : held_message());
  return buffer;
}

std::string ImageLoader::held_message() const {
  return "image loader: every one of its " + std::to_string(pool_->capacity()) +
         " batch buffers is held by batches still alive: keep at most " + std::to_string(opt_.batches_held) +
         " batches at once (ImageLoaderOptions::batches_held), or clone() what you keep";
}

ImageBatch ImageLoader::build_batch(int64_t index) const { return build_batch(index, false); }

ImageBatch ImageLoader::build_batch(int64_t index, bool on_worker) const {
  const int64_t B = opt_.batch_size, n = static_cast<int64_t>(slots_.size());
  const int64_t begin = index * B, end = std::min(n, begin + B);
  CMHA_CHECK(begin < end, "image loader: batch " + std::to_string(index) + " is past the epoch's end");
  const ImageTransformOptions& t = opt_.transform;
  const int64_t S = t.image_size;
  const bool erasing = opt_.training && t.random_erasing > 0;
  ImageBatch batch;
  std::vector<int64_t> labels, erase_rows;  // erase_rows: kEraseFields per kept sample
  int64_t C = 0;
  std::shared_ptr<Storage> buffer;
  uint8_t* dst = nullptr;
  for (int64_t k = begin; k < end; ++k) {
    const Slot& slot = slots_[k];
    // A bad file fails at its header (open) or in its pixels (the transform);
    // either way its slot of the batch is taken by the next sample.
    try {
      ImageSource src = dataset_->open(slot.sample);
      if (C == 0) {
        // The first good image fixes the channel count; samples go straight into the batch's buffer.
        C = src.channels();
        buffer = take_buffer(C, on_worker);
        dst = static_cast<uint8_t*>(buffer->data());
      }
      CMHA_CHECK(src.channels() == C, dataset_->describe(slot.sample) + ": " + std::to_string(src.channels()) +
                                          " channels where the batch has " + std::to_string(C));
      SampleRandom rng(seed_, epoch_, slot.stream, kSampleDomain);
      const EraseDraw e = transform_sample(src, t, opt_.training, rng, dst + static_cast<int64_t>(labels.size()) * C * S * S);
      if (erasing)
        erase_rows.insert(erase_rows.end(), {e.top, e.left, e.height, e.width, static_cast<int64_t>(slot.stream),
                                             static_cast<int64_t>(e.first_word)});
    } catch (const Error&) {
      if (!opt_.skip_bad_images) throw;
      ++batch.skipped;
      continue;
    }
    labels.push_back(dataset_->label(slot.sample));
    batch.indices.push_back(slot.sample);
  }
  const auto kept = static_cast<int64_t>(labels.size());
  CMHA_CHECK(kept > 0, "image loader: every image of batch " + std::to_string(index) + " is unreadable (first: " +
                           dataset_->describe(slots_[begin].sample) + ")");
  batch.images = view_bytes(buffer, 0, {kept, C, S, S}, DType::u8);  // [kept, C, S, S] u8
  if (erasing) {
    batch.erase = view_bytes(buffer, erase_offset(B, C, S), {kept, backend::kEraseFields}, DType::i64);
    std::copy(erase_rows.begin(), erase_rows.end(), batch.erase.data<int64_t>());
  }
  batch.prepare = normalisation_params(t.mean, t.std, C);
  const SampleRandom sample_streams(seed_, epoch_, 0, kSampleDomain);
  batch.prepare.key[0] = sample_streams.key()[0], batch.prepare.key[1] = sample_streams.key()[1];
  batch.prepare.domain = kSampleDomain;
  batch.labels = Tensor::from_vector_i64(labels, {kept});
  if (opt_.training && opt_.mixup.enabled()) {
    SampleRandom rng(seed_, epoch_, (static_cast<uint64_t>(rank_) << 40) | static_cast<uint64_t>(index), kMixDomain);
    const MixDecision mix = draw_mix(opt_.mixup, S, S, rng);
    set_mix(batch.prepare, mix);
    batch.targets = mixed_targets(labels, dataset_->num_classes(), mix.lambda, opt_.mixup.label_smoothing);
  }
  return batch;
}

void ImageLoader::start_epoch(int64_t epoch) {
  stop_workers();
  plan_epoch(epoch);
  start_workers(0);
}

void ImageLoader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_work_.notify_all();
  pool_->interrupt();  // a worker waiting for a buffer gives up
  for (auto& t : threads_) t.join();
  threads_.clear();
  ready_.clear();
  failed_.clear();
  building_ = 0;
  pool_->resume();
  stopping_ = false;
}

void ImageLoader::start_workers(int64_t first_batch) {
  next_to_build_ = first_batch;
  for (int w = 0; w < opt_.workers; ++w) threads_.emplace_back([this] { worker_loop(); });
}

void ImageLoader::worker_loop() {
  const int64_t total = batches_per_epoch();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // Claim the next batch unless `prefetch` batches are already ready or in flight.
    cv_work_.wait(lock, [&] { return stopping_ || (next_to_build_ < total && next_to_build_ < consumed_ + opt_.prefetch); });
    if (stopping_) return;
    const int64_t index = next_to_build_++;
    ++building_;
    lock.unlock();
    ImageBatch batch;
    std::exception_ptr error;
    try {
      batch = build_batch(index, true);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    --building_;
    if (error)
      failed_[index] = error;
    else
      ready_[index] = std::move(batch);
    cv_ready_.notify_all();
  }
}

bool ImageLoader::next(ImageBatch& batch) {
  CMHA_CHECK(epoch_ >= 0, "image loader: next() before start_epoch()");
  if (consumed_ >= batches_per_epoch()) return false;
  batch = ImageBatch{};  // the caller's previous batch gives its buffer back first
  if (opt_.workers == 0) {
    batch = build_batch(consumed_, false);
  } else {
    for (bool drained = false;; drained = true) {
      std::unique_lock<std::mutex> lock(mu_);
      // Stalled: every batch being built waits for a buffer, and only the caller's batches can free one.
      cv_ready_.wait(lock, [&] {
        return ready_.count(consumed_) || failed_.count(consumed_) || pool_->stalled(building_);
      });
      // The batch stays unconsumed and its error stays: calling next() again raises it again.
      if (auto f = failed_.find(consumed_); f != failed_.end()) std::rethrow_exception(f->second);
      if (auto r = ready_.find(consumed_); r != ready_.end()) {
        batch = std::move(r->second);
        ready_.erase(r);
        break;
      }
      lock.unlock();
      // The emulated GPU's queued copies may still hold buffers the caller let go: once, let them run.
      if (drained || !cuda_emulated_async()) throw Error(held_message());
      emulated_drain();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++consumed_;
    bad_images_ += batch.skipped;
  }
  cv_work_.notify_all();
  return true;
}

int64_t ImageLoader::bad_images() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bad_images_;
}

nlohmann::json ImageLoader::state() const {
  return {{"epoch", epoch_}, {"batch", consumed_}, {"bad_images", bad_images()}};
}

void ImageLoader::restore(const nlohmann::json& s) {
  const int64_t epoch = s.at("epoch").get<int64_t>(), batch = s.at("batch").get<int64_t>();
  stop_workers();
  bad_images_ = s.value("bad_images", int64_t{0});
  if (epoch < 0) {
    epoch_ = -1;
    return;
  }
  CMHA_CHECK(batch >= 0 && batch <= batches_per_epoch(),
             "image loader: saved batch " + std::to_string(batch) + " is outside the epoch's " +
                 std::to_string(batches_per_epoch()) + " batches");
  plan_epoch(epoch);
  consumed_ = batch;
  start_workers(batch);
}

}  // namespace cmha::data
