#include "optim/sgd.h"

#include <cmath>

#include "backend/kernels.h"
#include "optim/param_label.h"
#include "tensor/error.h"

namespace cmha::optim {
namespace {

void check_options(const SgdOptions& o) {
  CMHA_CHECK(o.lr >= 0.0 && std::isfinite(o.lr),
             "SGD: learning rate " + number_str(o.lr) + " must be a finite non-negative number");
  CMHA_CHECK(o.momentum >= 0.0 && std::isfinite(o.momentum),
             "SGD: momentum " + number_str(o.momentum) + " must be a finite non-negative number");
  CMHA_CHECK(o.dampening >= 0.0 && o.dampening <= 1.0,
             "SGD: dampening " + number_str(o.dampening) + " must lie in [0, 1]");
  CMHA_CHECK(o.weight_decay >= 0.0 && std::isfinite(o.weight_decay),
             "SGD: weight decay " + number_str(o.weight_decay) + " must be a finite non-negative number");
  CMHA_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0),
             "SGD: nesterov momentum needs a positive momentum and zero dampening");
}

}  // namespace

SGD::SGD(const std::vector<Tensor>& params, SgdOptions options) : SGD(all_with_weight_decay(params), options) {}

SGD::SGD(std::vector<SgdParam> params, SgdOptions options) : Optimizer(std::move(params)), options_(options) {
  check_options(options_);
  state_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].tensor;
    CMHA_CHECK(p.defined(), "SGD: " + label(p, i) + " is an undefined tensor");
    CMHA_CHECK(p.dtype() == DType::f32 && p.is_contiguous(),
               "SGD: " + label(p, i) + " is " + layout(p) + "; only contiguous f32 parameters are supported");
  }
}

void SGD::step(const Tensor& gate) {
  check_options(options_);
  const SgdOptions& o = options_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].tensor;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    CMHA_CHECK(g.shape() == p.shape() && g.dtype() == DType::f32 && g.device() == p.device(),
               "SGD: the gradient of " + label(p, i) + " is " + layout(g) + " but the parameter is " +
                   layout(p));
    if (!g.is_contiguous()) g = g.contiguous();

    SgdState& s = state_[i];
    const bool use_momentum = o.momentum != 0.0;
    const bool first = use_momentum && !s.momentum_buffer.defined();
    if (first) s.momentum_buffer = Tensor::zeros(p.shape(), DType::f32, p.device());
    if (use_momentum)
      CMHA_CHECK(s.momentum_buffer.shape() == p.shape() && s.momentum_buffer.dtype() == DType::f32 &&
                     s.momentum_buffer.device() == p.device() && s.momentum_buffer.is_contiguous(),
                 "SGD: the momentum buffer of " + label(p, i) + " is " + layout(s.momentum_buffer) +
                     " but the parameter is " + layout(p));
    const Tensor buffer = use_momentum ? s.momentum_buffer : Tensor();  // undefined: no momentum
    const Device dev = common_device("SGD", {p, g, buffer});

    backend::SgdStep k;
    k.weight_decay = static_cast<float>(params_[i].weight_decay ? o.weight_decay : 0.0);
    k.momentum = static_cast<float>(o.momentum);
    k.one_minus_dampening = static_cast<float>(1.0 - o.dampening);
    k.neg_lr = static_cast<float>(-o.lr);
    k.nesterov = o.nesterov;
    k.first = first;
    CMHA_KERNEL(dev, optim.sgd_step)(p, g, buffer, k, gate);
    p.bump_version();  // a graph still holding p would now backpropagate through other weights
    if (buffer.defined()) buffer.bump_version();
  }
}

OptimizerState SGD::state_dict(const std::vector<std::string>& names) const {
  CMHA_CHECK(names.size() == params_.size(), "SGD: state_dict got " + std::to_string(names.size()) +
                                                 " names for " + std::to_string(params_.size()) + " parameters");
  OptimizerState out;
  for (size_t i = 0; i < params_.size(); ++i)  // undefined until a parameter's first gradient
    if (state_[i].momentum_buffer.defined()) out.tensors["momentum_buffer." + names[i]] = state_[i].momentum_buffer;
  return out;
}

void SGD::load_state_dict(const OptimizerState& state, const std::vector<std::string>& names, const std::string&) {
  CMHA_CHECK(names.size() == params_.size(), "SGD: load_state_dict got " + std::to_string(names.size()) +
                                                 " names for " + std::to_string(params_.size()) + " parameters");
  for (size_t i = 0; i < params_.size(); ++i) {
    auto it = state.tensors.find("momentum_buffer." + names[i]);
    if (it != state.tensors.end()) state_[i].momentum_buffer = it->second.clone();
  }
}

}  // namespace cmha::optim
