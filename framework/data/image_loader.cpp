#include "data/image_loader.h"

#include <algorithm>
#include <numeric>

#include "tensor/error.h"

namespace cmha::data {

namespace {
// Random-stream domains, so the order, the samples and the mixup never share numbers.
constexpr uint32_t kOrderDomain = 1, kSampleDomain = 2, kMixDomain = 3;
}  // namespace

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
  // The epoch's permutation (Fisher-Yates on the order stream), the same on every rank.
  std::vector<int64_t> perm(N);
  std::iota(perm.begin(), perm.end(), 0);
  SampleRandom order(seed_, epoch, 0, kOrderDomain);
  for (int64_t i = N - 1; i > 0; --i) std::swap(perm[i], perm[order.integer(0, i + 1)]);
  // Position p of the (repeated, wrapped-around) list is image perm[(p / repeats) mod (N · repeats)];
  // rank r takes positions r, r + world, ...; the position keys the sample's randomness.
  const int64_t per_rank = (N + world_ - 1) / world_, total = N * opt_.repeats;
  for (int64_t i = 0; i < per_rank; ++i) {
    const int64_t p = rank_ + i * world_;
    slots_.push_back({perm[(p % total) / opt_.repeats], static_cast<uint64_t>(p)});
  }
}

ImageBatch ImageLoader::build_batch(int64_t index) const {
  const int64_t B = opt_.batch_size, n = static_cast<int64_t>(slots_.size());
  const int64_t begin = index * B, end = std::min(n, begin + B);
  CMHA_CHECK(begin < end, "image loader: batch " + std::to_string(index) + " is past the epoch's end");
  const ImageTransformOptions& t = opt_.transform;
  const int64_t S = t.image_size;
  ImageBatch batch;
  std::vector<int64_t> labels;
  int64_t C = 0;
  float* dst = nullptr;
  for (int64_t k = begin; k < end; ++k) {
    const Slot& slot = slots_[k];
    // A bad file fails at its header (open) or in its pixels (the transform);
    // either way its slot of the batch is taken by the next sample.
    try {
      ImageSource src = dataset_->open(slot.sample);
      if (C == 0) {
        // The first good image fixes the channel count; samples go straight into the batch.
        C = src.channels();
        batch.images = opt_.pin_memory ? Tensor::empty_pinned({end - begin, C, S, S}) : Tensor::empty({end - begin, C, S, S});
        dst = batch.images.data<float>();
      }
      CMHA_CHECK(src.channels() == C, dataset_->describe(slot.sample) + ": " + std::to_string(src.channels()) +
                                          " channels where the batch has " + std::to_string(C));
      SampleRandom rng(seed_, epoch_, slot.stream, kSampleDomain);
      transform_sample(src, t, opt_.training, rng, dst + static_cast<int64_t>(labels.size()) * C * S * S);
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
  if (kept < end - begin) batch.images = batch.images.narrow(0, 0, kept).contiguous();  // [kept, C, S, S]
  batch.labels = Tensor::from_vector_i64(labels, {kept});
  if (opt_.training && opt_.mixup.enabled()) {
    SampleRandom rng(seed_, epoch_, (static_cast<uint64_t>(rank_) << 40) | static_cast<uint64_t>(index), kMixDomain);
    const MixDecision mix = draw_mix(opt_.mixup, S, S, rng);
    mix_images(batch.images, mix);
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
  for (auto& t : threads_) t.join();
  threads_.clear();
  ready_.clear();
  failed_.clear();
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
    lock.unlock();
    ImageBatch batch;
    std::exception_ptr error;
    try {
      batch = build_batch(index);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
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
  if (opt_.workers == 0) {
    batch = build_batch(consumed_);
  } else {
    std::unique_lock<std::mutex> lock(mu_);
    cv_ready_.wait(lock, [&] { return ready_.count(consumed_) || failed_.count(consumed_); });
    // The batch stays unconsumed and its error stays: calling next() again raises it again.
    if (auto f = failed_.find(consumed_); f != failed_.end()) std::rethrow_exception(f->second);
    auto r = ready_.find(consumed_);
    batch = std::move(r->second);
    ready_.erase(r);
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
