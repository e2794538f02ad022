#pragma once
// A tiny training task for the trainer's tests: y = x·w* with a 4 → 1 linear
// model, 4 batches an epoch of 8 samples. `correct` counts the samples within
// 0.5 of their target; validation reports the loss and a constant top1 of 50;
// the batches listed in `poison` (counted over the whole run) give a NaN loss.
#include <cmath>
#include <memory>
#include <set>
#include <utility>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "nn/layers.h"
#include "support/check.h"
#include "train/task.h"

namespace cmha::test {

class RegressionTask : public train::Task {
 public:
  explicit RegressionTask(std::set<int64_t> poison = {}) : poison_(std::move(poison)) {
    Generator g(1);
    model_ = std::make_shared<nn::Linear>(4, 1, true, g);
    x_ = random_tensor({32, 4}, 2);
    y_ = matmul(x_, Tensor::from_vector({1, -2, 3, 0.5f}, {4, 1}));
  }
  nn::Module& model() override { return *model_; }
  const char* unit_name() const override { return "samples"; }
  void start_epoch(int64_t e) override {
    epoch_ = e;
    pos_ = 0;
  }
  bool has_next_batch() const override { return pos_ < 4; }
  train::BatchLoss next_batch_loss() override {
    Tensor x = x_.slice(0, pos_ * 8, pos_ * 8 + 8), y = y_.slice(0, pos_ * 8, pos_ * 8 + 8);
    Tensor d = sub(model_->forward(x), y);  // [8, 1]
    Tensor loss = sum(mul(d, d));
    if (poison_.count(served_++)) loss = mul_scalar(loss, NAN);
    ++pos_;
    double correct = 0;
    for (float v : d.detach().to_float_vector()) correct += std::fabs(v) < 0.5f;
    return {loss, 8, correct};
  }
  int64_t batches_per_epoch() const override { return 4; }
  std::map<std::string, double> validate() override {
    ++validations;
    autograd::NoGradGuard ng;
    Tensor d = sub(model_->forward(x_), y_);
    return {{"loss", mean(mul(d, d)).item()}, {"top1", 50.0}};
  }
  nlohmann::json data_state() const override { return {{"epoch", epoch_}, {"pos", pos_}}; }
  void restore_data_state(const nlohmann::json& s) override {
    epoch_ = s.at("epoch");
    pos_ = s.at("pos");
  }

  std::shared_ptr<nn::Linear> model_;
  int validations = 0;

 private:
  Tensor x_, y_;
  std::set<int64_t> poison_;
  int64_t epoch_ = 0, pos_ = 0, served_ = 0;
};

}  // namespace cmha::test
