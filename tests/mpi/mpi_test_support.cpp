#include "mpi_test_support.h"

#include <algorithm>
#include <numeric>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "support/check.h"

namespace cmha::mpitest {

namespace {
constexpr int64_t kSamples = 64, kIn = 8, kHidden = 16;

// Rows `idx` of a [N, C] tensor, copied.
Tensor rows(const Tensor& t, const std::vector<int64_t>& idx) {
  const int64_t C = t.size(1);
  Tensor out = Tensor::empty({static_cast<int64_t>(idx.size()), C});
  const float* src = t.data<float>();
  float* dst = out.data<float>();
  for (size_t i = 0; i < idx.size(); ++i) std::copy(src + idx[i] * C, src + (idx[i] + 1) * C, dst + i * C);
  return out;
}
}  // namespace

std::string shared_temp_dir(const std::string& tag) {
  return world().all_gather_bytes(world().is_main() ? test::temp_dir(tag) : "").at(0);
}

struct ShardedRegressionTask::Net : nn::Module {
  explicit Net(Generator& g) {
    hidden = register_module("hidden", std::make_shared<nn::Linear>(kIn, kHidden, true, g));
    out = register_module("out", std::make_shared<nn::Linear>(kHidden, 1, true, g));
  }
  Tensor forward(const Tensor& x) const { return out->forward(tanh(hidden->forward(x))); }  // [B, 8] -> [B, 1]
  std::shared_ptr<nn::Linear> hidden, out;
};

ShardedRegressionTask::ShardedRegressionTask(int rank, int world, int64_t batch)
    : rank_(rank), world_(world), batch_(batch) {
  Generator init(5);
  net_ = std::make_shared<Net>(init);  // initialised on the CPU: the same weights on every device
  x_ = test::random_tensor({kSamples, kIn}, 11);
  Generator teacher_init(6);
  Net teacher(teacher_init);
  autograd::NoGradGuard no_grad;
  y_ = add(teacher.forward(x_), mul_scalar(test::random_tensor({kSamples, 1}, 12), 0.1f));
  net_->to(world_device());
}

nn::Module& ShardedRegressionTask::model() { return *net_; }

void ShardedRegressionTask::start_epoch(int64_t epoch) {
  epoch_ = epoch;
  position_ = 0;
  Tensor keys = test::random_tensor({kSamples}, 100 + static_cast<uint64_t>(epoch));
  const float* k = keys.data<float>();
  std::vector<int64_t> all(kSamples);
  std::iota(all.begin(), all.end(), 0);
  std::stable_sort(all.begin(), all.end(), [&](int64_t a, int64_t b) { return k[a] < k[b]; });
  order_.clear();
  for (int64_t i = 0; i < kSamples / world_; ++i) order_.push_back(all[i * world_ + rank_]);
}

int64_t ShardedRegressionTask::batches_per_epoch() const { return (kSamples / world_ + batch_ - 1) / batch_; }

train::BatchLoss ShardedRegressionTask::next_batch_loss() {
  const int64_t end = std::min<int64_t>(position_ + batch_, static_cast<int64_t>(order_.size()));
  const std::vector<int64_t> idx(order_.begin() + position_, order_.begin() + end);
  position_ = end;
  const Device device = world_device();
  Tensor d = sub(net_->forward(rows(x_, idx).to(device)), rows(y_, idx).to(device));  // [B, 1]
  return {sum(mul(d, d)), static_cast<int64_t>(idx.size()), 0};
}

std::map<std::string, double> ShardedRegressionTask::validate() {
  autograd::NoGradGuard no_grad;
  Tensor d = sub(net_->forward(x_.to(world_device())), y_.to(world_device()));
  return {{"loss", mean(mul(d, d)).item()}};
}

nlohmann::json ShardedRegressionTask::data_state() const {
  return {{"epoch", epoch_}, {"position", position_}, {"world", world_}};
}

void ShardedRegressionTask::restore_data_state(const nlohmann::json& s) {
  start_epoch(s.at("epoch").get<int64_t>());
  position_ = s.at("position").get<int64_t>() * s.at("world").get<int64_t>() / world_;
}

run::Recipe regression_recipe(const std::string& dir, int64_t epochs, const std::string& extra) {
  return run::Recipe::parse("optim: {name: adam, lr: 0.01, betas: [0.9, 0.999], eps: 1e-8}\n"
                              "lr: {schedule: constant, warmup: 0}\n"
                              "train: {save_dir: " + dir + ", max_epochs: " + std::to_string(epochs) +
                                  ", log_every: 1000, keep_last: 0, dist_bucket_mb: 0.00005}\n" + extra,
                              "<mpi test recipe>");
}

}  // namespace cmha::mpitest
