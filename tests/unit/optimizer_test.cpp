// The one Optimizer interface (optim/optimizer.h): make_optimizer from the
// optim.* options, the state dict that checkpoints store, and the optim and
// buckets kernel families of the CPU table.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "backend/kernels.h"
#include "optim/adam.h"
#include "optim/optimizer.h"
#include "optim/sgd.h"
#include "support/check.h"

using namespace cmha;
using namespace cmha::test;

namespace {

// Three parameters: "w" and "c" decayed, "b" not.
std::vector<optim::OptimParam> three_params(uint64_t seed) {
  return {{random_tensor({4, 3}, seed, -1.0f, 1.0f, true).set_name("w"), true},
          {random_tensor({5}, seed + 1, -1.0f, 1.0f, true).set_name("c"), true},
          {random_tensor({3}, seed + 2, -1.0f, 1.0f, true).set_name("b"), false}};
}

std::vector<optim::OptimParam> clones(const std::vector<optim::OptimParam>& ps) {
  std::vector<optim::OptimParam> out;
  for (const auto& p : ps) out.push_back({p.tensor.detach().clone().set_requires_grad(true), p.weight_decay});
  return out;
}

const std::vector<std::string> kParamNames = {"w", "c", "b"};

// Step `step`'s gradients: "c" has none at step 2 (its state must stay as it is).
void set_grads(const std::vector<optim::OptimParam>& ps, int step) {
  for (size_t i = 0; i < ps.size(); ++i) {
    Tensor p = ps[i].tensor;
    if (step == 2 && i == 1) p.zero_grad();
    else p.set_grad(random_tensor(p.shape(), 100 * step + i));
  }
}

using cmha::test::same_bytes;

optim::OptimizerOptions options_for(const std::string& name) {
  optim::OptimizerOptions o;
  o.name = name;
  o.lr = 0.01;
  o.betas = {0.8, 0.99};
  o.eps = 1e-6;
  o.momentum = 0.9;
  o.nesterov = name == "sgd";
  o.weight_decay = 0.05;
  return o;
}

}  // namespace

TEST(Optimizer, MakeOptimizerMapsTheNameToItsClassAndOptions) {
  auto adam = optim::make_optimizer(options_for("adam"), three_params(1));
  EXPECT_STREQ(adam->name(), "adam");
  const auto* a = dynamic_cast<const optim::Adam*>(adam.get());
  ASSERT_NE(a, nullptr);
  EXPECT_FALSE(a->options().decoupled_weight_decay);
  EXPECT_EQ(a->options().beta1, 0.8);
  EXPECT_EQ(a->options().beta2, 0.99);
  EXPECT_EQ(a->options().eps, 1e-6);
  EXPECT_EQ(a->options().weight_decay, 0.05);
  EXPECT_EQ(adam->lr(), 0.01);
  EXPECT_EQ(adam->params().size(), 3u);
  EXPECT_FALSE(adam->params()[2].weight_decay);

  auto adamw = optim::make_optimizer(options_for("adamw"), three_params(1));
  EXPECT_STREQ(adamw->name(), "adamw");
  ASSERT_NE(dynamic_cast<const optim::Adam*>(adamw.get()), nullptr);
  EXPECT_TRUE(dynamic_cast<const optim::Adam*>(adamw.get())->options().decoupled_weight_decay);

  auto sgd = optim::make_optimizer(options_for("sgd"), three_params(1));
  EXPECT_STREQ(sgd->name(), "sgd");
  const auto* s = dynamic_cast<const optim::SGD*>(sgd.get());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->options().momentum, 0.9);
  EXPECT_TRUE(s->options().nesterov);
  EXPECT_EQ(s->options().dampening, 0.0);
  EXPECT_EQ(s->options().weight_decay, 0.05);
  sgd->set_lr(0.5);
  EXPECT_EQ(sgd->lr(), 0.5);
}

TEST(Optimizer, UnknownNamesAndBadBetasAreErrors) {
  optim::OptimizerOptions o = options_for("lamb");
  EXPECT_NE(error_of([&] { optim::make_optimizer(o, three_params(1)); }).find("unknown optimiser 'lamb'"),
            std::string::npos);
  o = options_for("adam");
  o.betas = {0.9, 0.99, 0.999};
  EXPECT_NE(error_of([&] { optim::make_optimizer(o, three_params(1)); }).find("optim.betas needs two numbers, got 3"),
            std::string::npos);
}

TEST(Optimizer, TheStateDictResumesEveryOptimiserBitIdentically) {
  for (const std::string name : {"adam", "adamw", "sgd"}) {
    const std::vector<optim::OptimParam> run = three_params(7);
    auto straight = optim::make_optimizer(options_for(name), run);
    for (int step = 1; step <= 2; ++step) {
      set_grads(run, step);
      straight->step();
    }
    const optim::OptimizerState saved = straight->state_dict(kParamNames);
    if (name == "sgd") {
      EXPECT_EQ(saved.tensors.size(), 3u) << name;  // every parameter had a gradient at step 1
      EXPECT_TRUE(saved.tensors.count("momentum_buffer.c")) << name;
      EXPECT_TRUE(saved.steps.empty()) << name;
    } else {
      EXPECT_EQ(saved.tensors.size(), 6u) << name;
      EXPECT_TRUE(saved.tensors.count("exp_avg.w") && saved.tensors.count("exp_avg_sq.b")) << name;
      EXPECT_EQ(saved.steps.at("w"), 2) << name;
      EXPECT_EQ(saved.steps.at("c"), 1) << name;  // no gradient at step 2
    }

    // A second optimiser over copies of the weights, given the saved state.
    const std::vector<optim::OptimParam> resumed = clones(run);
    auto again = optim::make_optimizer(options_for(name), resumed);
    again->load_state_dict(saved, kParamNames, "test state");
    set_grads(run, 3);
    set_grads(resumed, 3);
    straight->step();
    again->step();
    for (size_t i = 0; i < run.size(); ++i)
      EXPECT_TRUE(same_bytes(run[i].tensor, resumed[i].tensor)) << name << " " << kParamNames[i];
    const optim::OptimizerState a = straight->state_dict(kParamNames), b = again->state_dict(kParamNames);
    EXPECT_EQ(a.steps, b.steps) << name;
    ASSERT_EQ(a.tensors.size(), b.tensors.size()) << name;
    for (const auto& [key, t] : a.tensors) EXPECT_TRUE(same_bytes(t, b.tensors.at(key))) << name << " " << key;
  }
}

TEST(Optimizer, SgdSavesOnlyTheBuffersItHas) {
  const std::vector<optim::OptimParam> ps = three_params(3);
  auto sgd = optim::make_optimizer(options_for("sgd"), ps);
  EXPECT_TRUE(sgd->state_dict(kParamNames).tensors.empty());
  Tensor w = ps[0].tensor;  // the only parameter with a gradient
  w.set_grad(random_tensor({4, 3}, 5));
  sgd->step();
  const optim::OptimizerState s = sgd->state_dict(kParamNames);
  ASSERT_EQ(s.tensors.size(), 1u);
  EXPECT_TRUE(s.tensors.count("momentum_buffer.w"));
  // Loading it elsewhere gives that parameter (only) a copy of the buffer.
  auto other = optim::make_optimizer(options_for("sgd"), clones(ps));
  other->load_state_dict(s, kParamNames, "test state");
  const auto& state = dynamic_cast<optim::SGD&>(*other).state();
  ASSERT_TRUE(state[0].momentum_buffer.defined());
  EXPECT_FALSE(state[0].momentum_buffer.same(s.tensors.at("momentum_buffer.w")));
  EXPECT_FALSE(state[1].momentum_buffer.defined());
}

TEST(Optimizer, AdamStateWithoutMomentsOrStepsNamesTheSourceAndParameter) {
  auto adam = optim::make_optimizer(options_for("adam"), three_params(1));
  optim::OptimizerState s = adam->state_dict(kParamNames);
  s.tensors.erase("exp_avg_sq.c");
  EXPECT_NE(error_of([&] { adam->load_state_dict(s, kParamNames, "checkpoint 'x'"); })
                .find("checkpoint 'x' has no optimiser state for 'c'"),
            std::string::npos);
  s = adam->state_dict(kParamNames);
  s.steps.erase("b");
  EXPECT_NE(error_of([&] { adam->load_state_dict(s, kParamNames, "checkpoint 'x'"); }).find("'b'"), std::string::npos);
  EXPECT_NE(error_of([&] { adam->state_dict({"w"}); }).find("1 names for 3 parameters"), std::string::npos);
}

TEST(OptimKernels, TheCpuTableHasEveryOptimAndBucketsEntry) {
  const Device cpu = Device::cpu();
  EXPECT_NO_THROW(CMHA_KERNEL(cpu, optim.adam_step));
  EXPECT_NO_THROW(CMHA_KERNEL(cpu, optim.sgd_step));
  EXPECT_NO_THROW(CMHA_KERNEL(cpu, optim.ema_update));
  EXPECT_NO_THROW(CMHA_KERNEL(cpu, optim.swap));
  EXPECT_NO_THROW(CMHA_KERNEL(cpu, optim.sum_squares));
  EXPECT_NO_THROW(CMHA_KERNEL(cpu, optim.all_finite));
  EXPECT_NO_THROW(CMHA_KERNEL(cpu, optim.scale));
  EXPECT_NO_THROW(CMHA_KERNEL(cpu, buckets.pack));
  EXPECT_NO_THROW(CMHA_KERNEL(cpu, buckets.unpack));
  EXPECT_NO_THROW(CMHA_KERNEL(cpu, buckets.scale));
}

TEST(OptimKernels, BucketPackUnpackAndScale) {
  const Device cpu = Device::cpu();
  Tensor bucket = Tensor::full({7}, 9.0);  // [a(3) | b(2) | flag a, flag b]
  const Tensor a = Tensor::from_vector({1, 2, 3}, {3});
  CMHA_KERNEL(cpu, buckets.pack)(a, bucket, 0, 3, 5);
  CMHA_KERNEL(cpu, buckets.pack)(Tensor(), bucket, 3, 2, 6);  // no gradient: zeros, flag 0
  EXPECT_EQ(bucket.to_float_vector(), (std::vector<float>{1, 2, 3, 0, 0, 1, 0}));
  Tensor out = Tensor::empty({3});
  CMHA_KERNEL(cpu, buckets.unpack)(bucket, 0, out, 0.5f);
  EXPECT_EQ(out.to_float_vector(), (std::vector<float>{0.5f, 1.0f, 1.5f}));
  CMHA_KERNEL(cpu, buckets.scale)(out, 4.0f);
  EXPECT_EQ(out.to_float_vector(), (std::vector<float>{2, 4, 6}));
}

TEST(OptimKernels, SumSquaresAllFiniteAndScaleOverAList) {
  const Device cpu = Device::cpu();
  Tensor a = Tensor::from_vector({3, 4}, {2}), b = Tensor::from_vector({12}, {1});
  EXPECT_EQ(CMHA_KERNEL(cpu, optim.sum_squares)({a, b}), 169.0);
  EXPECT_EQ(CMHA_KERNEL(cpu, optim.sum_squares)({}), 0.0);
  EXPECT_TRUE(CMHA_KERNEL(cpu, optim.all_finite)({a, b}));
  CMHA_KERNEL(cpu, optim.scale)({a, b}, 0.5f);
  EXPECT_EQ(a.to_float_vector(), (std::vector<float>{1.5f, 2.0f}));
  EXPECT_EQ(b.to_float_vector(), (std::vector<float>{6.0f}));
  b.fill_(std::numeric_limits<double>::infinity());
  EXPECT_FALSE(CMHA_KERNEL(cpu, optim.all_finite)({a, b}));
}
