#include "train/image_task.h"

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "train/checkpoint.h"
#include "train/model_config.h"
#include "train/trainer.h"

namespace cmha::train {

namespace fs = std::filesystem;

void check_idx_split(const data::LabelledImages& split, const nn::VitConfig& cfg, const std::string& images_path) {
  CMHA_CHECK(cfg.channels == 1 && split.images.size(1) == cfg.image_size && split.images.size(2) == cfg.image_size,
             "data: IDX images in '" + images_path + "' are " + std::to_string(split.images.size(1)) + "×" +
                 std::to_string(split.images.size(2)) + " grey, but the model expects model.image_size " +
                 std::to_string(cfg.image_size) + " with model.channels " + std::to_string(cfg.channels));
  const auto labels = split.labels.to_i64_vector();
  const auto [lo, hi] = std::minmax_element(labels.begin(), labels.end());
  CMHA_CHECK(labels.empty() || (*lo >= 0 && *hi < cfg.num_classes),
             "data: label " + std::to_string(*hi >= cfg.num_classes ? *hi : *lo) + " of '" + images_path +
                 "' is outside model.num_classes " + std::to_string(cfg.num_classes));
}

Tensor normalised_idx_batch(const Tensor& images, const std::vector<int64_t>& idx, float mean, float std) {
  const int64_t H = images.size(1), W = images.size(2), B = static_cast<int64_t>(idx.size());
  Tensor out = Tensor::empty({B, 1, H, W});
  const float* src = images.data<float>();
  float* dst = out.data<float>();
  const float inv_std = 1.0f / std;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < H * W; ++i) dst[b * H * W + i] = (src[idx[b] * H * W + i] - mean) * inv_std;
  return out;
}

eval::ClassificationScores evaluate_idx(nn::VisionTransformer& model, const data::LabelledImages& split, float mean,
                                        float std, int64_t batch_size) {
  autograd::NoGradGuard no_grad;
  model.eval();
  const int64_t n = split.labels.numel();
  const int64_t* labels = split.labels.data<int64_t>();
  eval::ClassificationMeter meter;
  for (int64_t start = 0; start < n; start += batch_size) {
    const int64_t end = std::min(n, start + batch_size);
    std::vector<int64_t> idx(end - start);
    std::iota(idx.begin(), idx.end(), start);
    Tensor logits = model.forward(normalised_idx_batch(split.images, idx, mean, std));  // [B, classes]
    meter.add(logits, Tensor::from_vector_i64(std::vector<int64_t>(labels + start, labels + end), {end - start}));
  }
  return meter.scores();
}

ImageClassificationTask::ImageClassificationTask(const Recipe& r, Generator& init_gen, int rank, int world)
    : rank_(rank), world_(world) {
  const nn::VitConfig cfg = vit_config(r);
  train_ = data::load_idx_split(r.string("data.train_images"), r.string("data.train_labels"));
  valid_ = data::load_idx_split(r.string("data.valid_images"), r.string("data.valid_labels"));
  check_idx_split(train_, cfg, r.string("data.train_images"));
  check_idx_split(valid_, cfg, r.string("data.valid_images"));
  batch_size_ = r.integer("data.batch_size");
  mean_ = static_cast<float>(r.real("data.mean"));
  std_ = static_cast<float>(r.real("data.std"));
  label_smoothing_ = static_cast<float>(r.real("train.label_smoothing"));
  seed_ = static_cast<uint64_t>(r.integer("train.seed"));
  model_ = std::make_shared<nn::VisionTransformer>(cfg, init_gen);
}

void ImageClassificationTask::start_epoch(int64_t epoch) {
  epoch_ = epoch;
  position_ = 0;
  // A permutation that depends only on (seed, epoch): sort indices by Philox keys.
  const int64_t n = train_.labels.numel();
  Generator gen(seed_ * 1000003ull + static_cast<uint64_t>(epoch));
  Tensor keys = Tensor::empty({n});
  uniform_(keys, gen);
  const float* k = keys.data<float>();
  std::vector<int64_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  std::stable_sort(all.begin(), all.end(), [&](int64_t a, int64_t b) { return k[a] < k[b]; });
  // Each rank takes every world-th sample; all ranks get the same count.
  const int64_t per_rank = n / world_;
  order_.clear();
  for (int64_t i = 0; i < per_rank; ++i) order_.push_back(all[i * world_ + rank_]);
}

int64_t ImageClassificationTask::batches_per_epoch() const {
  const int64_t per_rank = train_.labels.numel() / world_;
  return (per_rank + batch_size_ - 1) / batch_size_;
}

BatchLoss ImageClassificationTask::next_batch_loss() {
  const int64_t end = std::min<int64_t>(position_ + batch_size_, static_cast<int64_t>(order_.size()));
  std::vector<int64_t> idx(order_.begin() + position_, order_.begin() + end);
  position_ = end;
  Tensor x = normalised_idx_batch(train_.images, idx, mean_, std_);  // [B, 1, H, W]
  const int64_t* all_labels = train_.labels.data<int64_t>();
  std::vector<int64_t> y(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) y[i] = all_labels[idx[i]];
  Tensor labels = Tensor::from_vector_i64(y, {static_cast<int64_t>(y.size())});
  model_->train();
  Tensor logits = model_->forward(x);  // [B, classes]
  BatchLoss out;
  out.loss_sum = cross_entropy(logits, labels, label_smoothing_, -100, Reduction::sum);
  out.units = static_cast<int64_t>(idx.size());
  const auto pred = argmax(logits.detach(), 1).to_i64_vector();
  for (size_t i = 0; i < y.size(); ++i) out.correct += pred[i] == y[i];
  return out;
}

std::map<std::string, double> ImageClassificationTask::validate() {
  const eval::ClassificationScores s = evaluate_idx(*model_, valid_, mean_, std_, batch_size_);
  model_->train();
  return {{"loss", s.loss}, {"accuracy", s.top1}, {"top5", s.top5}};
}

nlohmann::json ImageClassificationTask::data_state() const { return {{"epoch", epoch_}, {"position", position_}}; }

void ImageClassificationTask::restore_data_state(const nlohmann::json& s) {
  start_epoch(s.at("epoch").get<int64_t>());
  position_ = s.at("position").get<int64_t>();
}

nlohmann::json ImageClassificationTask::final_evaluation(const std::string& run_dir) {
  const std::string latest = latest_checkpoint(run_dir);
  const std::string best = (fs::path(run_dir) / "checkpoint_best.safetensors").string();
  const std::string chosen = fs::exists(best) ? best : latest;
  CMHA_CHECK(!chosen.empty(), "final evaluation: run directory '" + run_dir + "' holds no checkpoint");
  std::map<std::string, Tensor> params;
  for (auto& [name, p] : model_->named_parameters()) params.emplace(name, p);
  restore_weights(chosen, load_checkpoint(chosen).weights, params);
  nlohmann::json out = evaluate_idx(*model_, valid_, mean_, std_, batch_size_).to_json();
  out["checkpoint"] = fs::path(chosen).filename().string();
  if (!latest.empty()) {
    const Checkpoint last = load_checkpoint(latest);
    if (!last.ema.empty()) {
      restore_weights(latest, last.ema, params);
      const eval::ClassificationScores ema = evaluate_idx(*model_, valid_, mean_, std_, batch_size_);
      out["ema_top1"] = ema.top1;
      out["ema_top5"] = ema.top5;
      out["ema_loss"] = ema.loss;
      out["ema_checkpoint"] = fs::path(latest).filename().string();
    }
  }
  return out;
}

}  // namespace cmha::train
