#include "optim/sgd.h"

#include <cmath>
#include <cstdio>

#include "optim/param_label.h"
#include "tensor/error.h"

namespace cmha::optim {
namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void check_options(const SgdOptions& o) {
  CMHA_CHECK(o.lr >= 0.0 && std::isfinite(o.lr),
             "SGD: learning rate " + num(o.lr) + " must be a finite non-negative number");
  CMHA_CHECK(o.momentum >= 0.0 && std::isfinite(o.momentum),
             "SGD: momentum " + num(o.momentum) + " must be a finite non-negative number");
  CMHA_CHECK(o.dampening >= 0.0 && o.dampening <= 1.0, "SGD: dampening " + num(o.dampening) + " must lie in [0, 1]");
  CMHA_CHECK(o.weight_decay >= 0.0 && std::isfinite(o.weight_decay),
             "SGD: weight decay " + num(o.weight_decay) + " must be a finite non-negative number");
  CMHA_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0),
             "SGD: nesterov momentum needs a positive momentum and zero dampening");
}

std::vector<SgdParam> with_default_decay(const std::vector<Tensor>& params) {
  std::vector<SgdParam> out;
  out.reserve(params.size());
  for (const Tensor& p : params) out.push_back({p, true});
  return out;
}

}  // namespace

SGD::SGD(const std::vector<Tensor>& params, SgdOptions options) : SGD(with_default_decay(params), options) {}

SGD::SGD(std::vector<SgdParam> params, SgdOptions options) : options_(options), params_(std::move(params)) {
  check_options(options_);
  state_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].tensor;
    CMHA_CHECK(p.defined(), "SGD: " + label(p, i) + " is an undefined tensor");
    CMHA_CHECK(p.dtype() == DType::f32 && p.device().is_cpu() && p.is_contiguous(),
               "SGD: " + label(p, i) + " is " + layout(p) + "; only contiguous f32 CPU parameters are supported");
  }
}

void SGD::zero_grad() {
  for (SgdParam& p : params_) p.tensor.zero_grad();
}

void SGD::step() {
  check_options(options_);
  const SgdOptions& o = options_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].tensor;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    CMHA_CHECK(g.shape() == p.shape() && g.dtype() == DType::f32 && g.device().is_cpu(),
               "SGD: the gradient of " + label(p, i) + " is " + layout(g) + " but the parameter is " +
                   layout(p));
    if (!g.is_contiguous()) g = g.contiguous();

    SgdState& s = state_[i];
    const bool use_momentum = o.momentum != 0.0;
    const bool first = use_momentum && !s.momentum_buffer.defined();
    if (first) s.momentum_buffer = Tensor::zeros(p.shape());
    if (use_momentum)
      CMHA_CHECK(s.momentum_buffer.shape() == p.shape() && s.momentum_buffer.dtype() == DType::f32 &&
                     s.momentum_buffer.device().is_cpu() && s.momentum_buffer.is_contiguous(),
                 "SGD: the momentum buffer of " + label(p, i) + " is " + layout(s.momentum_buffer) +
                     " but the parameter is " + layout(p));

    const float wd = static_cast<float>(params_[i].weight_decay ? o.weight_decay : 0.0);
    const float mu = static_cast<float>(o.momentum);
    const float one_minus_damp = static_cast<float>(1.0 - o.dampening);
    const float neg_lr = static_cast<float>(-o.lr);
    const bool nesterov = o.nesterov;

    float* pw = p.data<float>();
    const float* gw = g.data<float>();
    float* buf = use_momentum ? s.momentum_buffer.data<float>() : nullptr;
    const int64_t n = p.numel();
#pragma omp parallel for schedule(static) if (n > 16384)
    for (int64_t k = 0; k < n; ++k) {
      // The same operations in the same order as torch.optim's _single_tensor_sgd.
      float d = wd != 0.0f ? gw[k] + wd * pw[k] : gw[k];
      if (buf != nullptr) {
        buf[k] = first ? d : buf[k] * mu + one_minus_damp * d;
        d = nesterov ? d + mu * buf[k] : buf[k];
      }
      pw[k] = pw[k] + neg_lr * d;
    }
  }
}

}  // namespace cmha::optim
