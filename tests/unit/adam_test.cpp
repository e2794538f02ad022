// Adam and AdamW against torch.optim over three steps with a changing
// learning rate, a weight-decay exclusion and a step without a gradient.
#include <gtest/gtest.h>

#include <cmath>

#include "optim/adam.h"
#include "support/check.h"

using namespace cmha;
using namespace cmha::test;
using cmha::optim::Adam;
using cmha::optim::AdamOptions;
using cmha::optim::AdamParam;
using cmha::optim::AdamW;

namespace {

const char* kFixtureParams[] = {"w", "c", "b"};  // b is excluded from weight decay

// Replays fixture `name` (see tests/reference/fixtures_optim.py) through `opt`
// and compares the parameters after every step and the final state.
void replay(const std::string& name, Adam& opt, std::vector<Tensor>& params) {
  SafetensorsFile f = load_fixture(name);
  std::vector<float> lrs = f.tensors.at("lr").to_float_vector();
  for (int step = 1; step <= 3; ++step) {
    opt.set_lr(lrs[step - 1]);
    for (size_t i = 0; i < params.size(); ++i) {
      auto it = f.tensors.find("grad." + std::to_string(step) + "." + kFixtureParams[i]);
      if (it == f.tensors.end()) params[i].zero_grad();
      else params[i].set_grad(it->second.clone());
    }
    opt.step();
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(all_close(params[i], fixture_tensor(f, "param." + std::to_string(step) + "." + kFixtureParams[i]),
                            1e-6f, 1e-6f))
          << name << " step " << step << " parameter " << kFixtureParams[i];
    }
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string k = kFixtureParams[i];
    EXPECT_TRUE(all_close(opt.state()[i].exp_avg, fixture_tensor(f, "exp_avg." + k), 1e-6f, 1e-6f)) << k;
    EXPECT_TRUE(all_close(opt.state()[i].exp_avg_sq, fixture_tensor(f, "exp_avg_sq." + k), 1e-6f, 1e-6f)) << k;
    EXPECT_EQ(opt.state()[i].step, fixture_tensor(f, "step." + k).to_i64_vector()[0]) << k;
  }
}

std::vector<Tensor> initial_params(const std::string& name) {
  SafetensorsFile f = load_fixture(name);
  std::vector<Tensor> params;
  for (const char* k : kFixtureParams) params.push_back(fixture_tensor(f, std::string("init.") + k, true).set_name(k));
  return params;
}

std::vector<AdamParam> with_exclusion(const std::vector<Tensor>& params) {
  return {{params[0], true}, {params[1], true}, {params[2], false}};
}

}  // namespace

TEST(Adam, MatchesPyTorchWithL2DecayExclusionAndSkippedParameter) {
  std::vector<Tensor> params = initial_params("optim_adam");
  AdamOptions o;
  o.beta1 = 0.9;
  o.beta2 = 0.999;
  o.eps = 1e-8;
  o.weight_decay = 0.1;
  Adam opt(with_exclusion(params), o);
  replay("optim_adam", opt, params);
  EXPECT_EQ(opt.state()[1].step, 2);  // "c" had no gradient at step 2
}

TEST(AdamW, MatchesPyTorchWithDecoupledDecay) {
  std::vector<Tensor> params = initial_params("optim_adamw");
  AdamOptions o = AdamW::with_decay(0.05);
  o.beta1 = 0.8;
  o.beta2 = 0.99;
  o.eps = 1e-6;
  AdamW opt(with_exclusion(params), o);
  EXPECT_TRUE(opt.options().decoupled_weight_decay);
  replay("optim_adamw", opt, params);
}

TEST(Adam, FirstStepMovesEachWeightByAboutLr) {
  // With bias correction the first update is lr·g/(|g|+ε) ≈ lr·sign(g).
  Tensor p = Tensor::from_vector({1.0f, -2.0f, 3.0f}, {3}).set_requires_grad(true);
  p.set_grad(Tensor::from_vector({0.5f, -4.0f, 1e-3f}, {3}));
  Adam opt({p}, AdamOptions{});
  opt.step();
  EXPECT_TRUE(all_close(p, Tensor::from_vector({0.999f, -1.999f, 2.999f}, {3}), 1e-6f, 0.0f));
}

TEST(Adam, LargeParameterUpdatesInParallelLikeASmallOne) {
  // Above the OpenMP threshold: the same per-element result as element-wise.
  const int64_t n = 100000;
  Tensor big = random_tensor({n}, 3).set_requires_grad(true);
  Tensor g = random_tensor({n}, 4);
  big.set_grad(g);
  Tensor small = big.detach().slice(0, 0, 10).clone().set_requires_grad(true);
  small.set_grad(g.slice(0, 0, 10).clone());
  AdamW a({big}), b({small});
  a.step();
  b.step();
  EXPECT_TRUE(all_close(big.slice(0, 0, 10), small, 1e-7f, 1e-6f));
}

TEST(Adam, ZeroGradDropsGradientsAndBadInputIsAnError) {
  Tensor p = Tensor::zeros({2}).set_requires_grad(true);
  p.set_grad(Tensor::ones({2}));
  Adam opt({p});
  opt.zero_grad();
  EXPECT_FALSE(p.grad().defined());
  opt.step();  // no gradient: nothing happens
  EXPECT_EQ(opt.state()[0].step, 0);

  p.set_grad(Tensor::ones({3}));
  try {
    opt.step();
    FAIL() << "a gradient of the wrong shape was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gradient of parameter 0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Adam({Tensor::zeros({2}, DType::i64)}), Error);
  AdamOptions bad;
  bad.beta2 = 1.0;
  EXPECT_THROW(Adam({Tensor::zeros({2})}, bad), Error);
}
