#include "optim/adam.h"

#include <cmath>

#include "backend/kernels.h"
#include "backend/working_copy.h"
#include "optim/param_label.h"
#include "tensor/error.h"

namespace cmha::optim {
namespace {

void check_options(const AdamOptions& o) {
  CMHA_CHECK(o.lr >= 0.0, "Adam: learning rate " + std::to_string(o.lr) + " is negative");
  CMHA_CHECK(o.beta1 >= 0.0 && o.beta1 < 1.0 && o.beta2 >= 0.0 && o.beta2 < 1.0,
             "Adam: betas (" + std::to_string(o.beta1) + ", " + std::to_string(o.beta2) + ") must lie in [0, 1)");
  CMHA_CHECK(o.eps >= 0.0, "Adam: eps " + std::to_string(o.eps) + " is negative");
  CMHA_CHECK(o.weight_decay >= 0.0, "Adam: weight decay " + std::to_string(o.weight_decay) + " is negative");
}

}  // namespace

Adam::Adam(const std::vector<Tensor>& params, AdamOptions options) : Adam(all_with_weight_decay(params), options) {}

Adam::Adam(std::vector<AdamParam> params, AdamOptions options) : Optimizer(std::move(params)), options_(options) {
  check_options(options_);
  state_.reserve(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].tensor;
    CMHA_CHECK(p.defined(), "Adam: " + label(p, i) + " is an undefined tensor");
    CMHA_CHECK(p.dtype() == DType::f32 && p.is_contiguous(),
               "Adam: " + label(p, i) + " is " + p.describe() + "; only contiguous f32 parameters are supported");
    state_.push_back(
        {0, Tensor::zeros(p.shape(), DType::f32, p.device()), Tensor::zeros(p.shape(), DType::f32, p.device())});
  }
}

void Adam::step(const Tensor& gate) {
  check_options(options_);
  const AdamOptions& o = options_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].tensor;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    CMHA_CHECK(g.shape() == p.shape() && g.dtype() == DType::f32 && g.device() == p.device(),
               "Adam: the gradient of " + label(p, i) + " is " + g.describe() + " but the parameter is " +
                   p.describe());
    if (!g.is_contiguous()) g = g.contiguous();

    AdamState& s = state_[i];
    const Device dev = common_device("Adam", {p, g, s.exp_avg, s.exp_avg_sq});
    s.step += 1;
    // Scalars in double as PyTorch computes them in Python, applied in f32.
    const double bias1 = 1.0 - std::pow(o.beta1, static_cast<double>(s.step));
    const double bias2 = 1.0 - std::pow(o.beta2, static_cast<double>(s.step));
    const double wd = params_[i].weight_decay ? o.weight_decay : 0.0;
    backend::AdamStep k;
    k.neg_step_size = static_cast<float>(-(o.lr / bias1));
    k.bias2_sqrt = static_cast<float>(std::sqrt(bias2));
    k.l2 = static_cast<float>(o.decoupled_weight_decay ? 0.0 : wd);               // Adam: g += wd·p
    k.shrink = static_cast<float>(o.decoupled_weight_decay ? 1.0 - o.lr * wd : 1.0);  // AdamW: p *= 1 - lr·wd
    k.beta1 = static_cast<float>(o.beta1);
    k.one_minus_beta1 = static_cast<float>(1.0 - o.beta1);
    k.beta2 = static_cast<float>(o.beta2);
    k.one_minus_beta2 = static_cast<float>(1.0 - o.beta2);
    k.eps = static_cast<float>(o.eps);
    // A parameter with a bf16 working copy (bf16 autocast) gets it rewritten
    // in the same pass: the next forward reads it instead of converting p.
    const Tensor copy = backend::bf16_copy_to_rewrite(p);
    CMHA_KERNEL(dev, optim.adam_step)(p, g, s.exp_avg, s.exp_avg_sq, copy, k, gate);
    p.bump_version();  // a graph still holding p would now backpropagate through other weights
    s.exp_avg.bump_version();
    s.exp_avg_sq.bump_version();
    if (copy.defined()) {
      copy.bump_version();
      backend::mark_bf16_copy_current(p);
    }
  }
}

OptimizerState Adam::state_dict(const std::vector<std::string>& names) const {
  CMHA_CHECK(names.size() == params_.size(), "Adam: state_dict got " + std::to_string(names.size()) +
                                                 " names for " + std::to_string(params_.size()) + " parameters");
  OptimizerState out;
  for (size_t i = 0; i < params_.size(); ++i) {
    out.tensors["exp_avg." + names[i]] = state_[i].exp_avg;
    out.tensors["exp_avg_sq." + names[i]] = state_[i].exp_avg_sq;
    out.steps[names[i]] = state_[i].step;
  }
  return out;
}

void Adam::load_state_dict(const OptimizerState& state, const std::vector<std::string>& names,
                           const std::string& source) {
  CMHA_CHECK(names.size() == params_.size(), "Adam: load_state_dict got " + std::to_string(names.size()) +
                                                 " names for " + std::to_string(params_.size()) + " parameters");
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& n = names[i];
    CMHA_CHECK(state.tensors.count("exp_avg." + n) && state.tensors.count("exp_avg_sq." + n),
               source + " has no optimiser state for '" + n + "'");
    CMHA_CHECK(state.steps.count(n), source + " has no optimiser step count for '" + n + "'");
    state_[i].exp_avg.copy_(state.tensors.at("exp_avg." + n));
    state_[i].exp_avg_sq.copy_(state.tensors.at("exp_avg_sq." + n));
    state_[i].step = state.steps.at(n);
  }
}

}  // namespace cmha::optim
