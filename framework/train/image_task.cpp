#include "train/image_task.h"

#include <omp.h>

#include <filesystem>

#include "autograd/accuracy.h"
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "run/checkpoint.h"
#include "run/device.h"
#include "run/model_config.h"
#include "run/run_dir.h"
#include "data/image_prepare.h"
#include "train/classifier_evaluation.h"
#include "train/image_pipeline.h"

namespace cmha::train {

namespace fs = std::filesystem;

eval::ClassificationScores evaluate_classifier(nn::VisionTransformer& model, data::ImageLoader& loader) {
  autograd::NoGradGuard no_grad;
  model.eval();
  eval::ClassificationMeter meter;
  loader.start_epoch(0);
  data::ImageBatch b;
  const Device device = model.parameters().front().device();
  while (loader.next(b)) meter.add(model.forward(data::model_input(b, device)), b.labels);  // logits [B, classes]
  return meter.scores();
}

nlohmann::json score_image_checkpoint(const std::string& checkpoint, const std::string& out_dir) {
  (void)out_dir;  // nothing to write beside the scores
  ClassifierEvaluationRequest request;
  request.checkpoints = {checkpoint};
  request.threads = omp_get_max_threads();  // as the caller set them, not the recipe's train.threads
  const ClassifierEvaluation e = evaluate_checkpoints(request);
  nlohmann::json out = e.first.to_json();
  out["split"] = e.images.split;
  out[e.images.split + "_source"] = e.images.name;
  return out;
}

ImageClassificationTask::ImageClassificationTask(const run::Recipe& r, Generator& init_gen, int rank, int world)
    : world_(world) {
  const ImageData d = make_image_data(r);
  const auto seed = static_cast<uint64_t>(r.integer("train.seed"));
  train_ = std::make_unique<data::ImageLoader>(d.train, image_loader_options(r, true), seed, rank, world);
  valid_ = std::make_unique<data::ImageLoader>(d.valid, image_loader_options(r, false), seed, 0, 1);
  if (d.test) test_ = std::make_unique<data::ImageLoader>(d.test, image_loader_options(r, false), seed, 0, 1);
  valid_source_ = d.valid_source;
  test_source_ = d.test_source;
  label_smoothing_ = static_cast<float>(r.real("train.label_smoothing"));
  model_ = std::make_shared<nn::VisionTransformer>(run::vit_config(r), init_gen);
  // Initialised on the CPU (the same numbers on every device), then moved.
  device_ = run::recipe_device(r);
  model_->to(device_);
}

void ImageClassificationTask::start_epoch(int64_t epoch) {
  ahead_.reset();
  train_->start_epoch(epoch);
}

bool ImageClassificationTask::has_next_batch() const {
  return ahead_.has_value() || train_->batch_index() < train_->batches_per_epoch();
}

ImageClassificationTask::BatchAhead ImageClassificationTask::take_training_batch() {
  BatchAhead b;
  b.loader_state = train_->state();
  CMHA_CHECK(train_->next(b.host), "image task: the epoch has no batch left (the trainer asked past its end)");
  // From the loader's page-locked buffer on a GPU: the copies do not wait.
  // The u8 pixels travel (a quarter of f32's bytes); the step makes them f32.
  b.images = b.host.images.to(device_);
  if (b.host.erase.defined()) b.erase = b.host.erase.to(device_);
  if (b.host.targets.defined()) b.targets = b.host.targets.pinned().to(device_);
  b.labels = b.host.labels.pinned().to(device_);  // the loss's targets, or (mixed) the accuracy's
  return b;
}

BatchLoss ImageClassificationTask::next_batch_loss() {
  const bool was_ahead = ahead_.has_value();
  BatchAhead b = was_ahead ? std::move(*ahead_) : take_training_batch();
  ahead_.reset();
  if (was_ahead) await_copies_ahead(device_);
  model_->train();
  // The step's first op: normalise, erase and mix on the training device.
  const Tensor images = data::prepare_images(b.images, b.erase, b.host.prepare);  // [B, C, S, S] u8 -> f32
  Tensor logits = model_->forward(images);  // [B, C, S, S] -> [B, classes]
  BatchLoss out;
  // Mixed batches carry soft targets with the smoothing in them already.
  out.loss_sum = b.targets.defined() ? soft_cross_entropy(logits, b.targets, 0.0f, Reduction::sum)
                                     : cross_entropy(logits, b.labels, label_smoothing_, -100, Reduction::sum);
  out.units = b.host.labels.numel();
  // Accuracy against the original labels (of the dominant image when mixed),
  // counted on the device and read at the trainer's log cadence.
  // argmax reads f32: under bf16 the logits are bf16.
  out.correct_count = count_correct(argmax(logits.detach().to(DType::f32), 1), b.labels, -100);
  // The forward pass is queued: take and send the next batch while the GPU runs it.
  if (!device_.is_cpu() && train_->batch_index() < train_->batches_per_epoch()) {
    CopyAheadScope ahead;
    ahead_ = take_training_batch();
  }
  return out;
}

std::map<std::string, double> ImageClassificationTask::validate() {
  const eval::ClassificationScores s = evaluate_classifier(*model_, *valid_);
  model_->train();
  return {{"loss", s.loss}, {"top1", s.top1}, {"top5", s.top5}};
}

nlohmann::json ImageClassificationTask::data_state() const {
  nlohmann::json s = ahead_ ? ahead_->loader_state : train_->state();
  s["world"] = world_;
  return s;
}

void ImageClassificationTask::restore_data_state(const nlohmann::json& state) {
  nlohmann::json s = state;
  // Every rank handed out `batch` batches: batch·world batches of the epoch's global
  // order are used, which is batch·world/new_world batches on each of the new ranks.
  const int64_t saved_world = s.value("world", int64_t{1});
  if (saved_world != world_) s["batch"] = s.at("batch").get<int64_t>() * saved_world / world_;
  s.erase("world");
  ahead_.reset();
  train_->restore(s);
}

nlohmann::json ImageClassificationTask::final_evaluation(const std::string& run_dir) {
  const std::string latest = run::latest_checkpoint(run_dir);
  const std::string best = (fs::path(run_dir) / "checkpoint_best.safetensors").string();
  const std::string chosen = fs::exists(best) ? best : latest;
  CMHA_CHECK(!chosen.empty(), "final evaluation: run directory '" + run_dir + "' holds no checkpoint");
  std::map<std::string, Tensor> params;
  for (auto& [name, p] : model_->named_parameters()) params.emplace(name, p);
  run::restore_weights(chosen, run::load_checkpoint(chosen).weights, params);
  // The test split, once, when there is one (checkpoint_best was chosen on the validation split).
  data::ImageLoader& scored = test_ ? *test_ : *valid_;
  nlohmann::json out = evaluate_classifier(*model_, scored).to_json();
  out["checkpoint"] = fs::path(chosen).filename().string();
  out["split"] = test_ ? "test" : "valid";
  out["valid_source"] = valid_source_;
  if (test_) out["test_source"] = test_source_;
  if (!latest.empty()) {
    const run::Checkpoint last = run::load_checkpoint(latest);
    if (!last.ema.empty()) {
      run::restore_weights(latest, last.ema, params);
      const eval::ClassificationScores ema = evaluate_classifier(*model_, scored);
      out["ema_top1"] = ema.top1;
      out["ema_top5"] = ema.top5;
      out["ema_loss"] = ema.loss;
      out["ema_checkpoint"] = fs::path(latest).filename().string();
    }
  }
  return out;
}

}  // namespace cmha::train
