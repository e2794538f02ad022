#include "optim/adam.h"

#include <cmath>

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

std::vector<AdamParam> with_default_decay(const std::vector<Tensor>& params) {
  std::vector<AdamParam> out;
  out.reserve(params.size());
  for (const Tensor& p : params) out.push_back({p, true});
  return out;
}

}  // namespace

Adam::Adam(const std::vector<Tensor>& params, AdamOptions options) : Adam(with_default_decay(params), options) {}

Adam::Adam(std::vector<AdamParam> params, AdamOptions options) : options_(options), params_(std::move(params)) {
  check_options(options_);
  state_.reserve(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].tensor;
    CMHA_CHECK(p.defined(), "Adam: " + label(p, i) + " is an undefined tensor");
    CMHA_CHECK(p.dtype() == DType::f32 && p.device().is_cpu() && p.is_contiguous(),
               "Adam: " + label(p, i) + " is " + p.describe() + "; only contiguous f32 CPU parameters are supported");
    state_.push_back({0, Tensor::zeros(p.shape()), Tensor::zeros(p.shape())});
  }
}

void Adam::zero_grad() {
  for (AdamParam& p : params_) p.tensor.zero_grad();
}

void Adam::step() {
  check_options(options_);
  const AdamOptions& o = options_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].tensor;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    CMHA_CHECK(g.shape() == p.shape() && g.dtype() == DType::f32 && g.device().is_cpu(),
               "Adam: the gradient of " + label(p, i) + " is " + g.describe() + " but the parameter is " +
                   p.describe());
    if (!g.is_contiguous()) g = g.contiguous();

    AdamState& s = state_[i];
    s.step += 1;
    // Scalars in double as PyTorch computes them in Python, applied in f32.
    const double bias1 = 1.0 - std::pow(o.beta1, static_cast<double>(s.step));
    const double bias2 = 1.0 - std::pow(o.beta2, static_cast<double>(s.step));
    const double wd = params_[i].weight_decay ? o.weight_decay : 0.0;
    const float neg_step_size = static_cast<float>(-(o.lr / bias1));
    const float bias2_sqrt = static_cast<float>(std::sqrt(bias2));
    const float l2 = static_cast<float>(o.decoupled_weight_decay ? 0.0 : wd);         // Adam: g += wd·p
    const float shrink = static_cast<float>(o.decoupled_weight_decay ? 1.0 - o.lr * wd : 1.0);  // AdamW: p *= 1 - lr·wd
    const float b1 = static_cast<float>(o.beta1), one_minus_b1 = static_cast<float>(1.0 - o.beta1);
    const float b2 = static_cast<float>(o.beta2), one_minus_b2 = static_cast<float>(1.0 - o.beta2);
    const float eps = static_cast<float>(o.eps);

    float* pw = p.data<float>();
    const float* gw = g.data<float>();
    float* m = s.exp_avg.data<float>();
    float* v = s.exp_avg_sq.data<float>();
    const int64_t n = p.numel();
#pragma omp parallel for schedule(static) if (n > 16384)
    for (int64_t k = 0; k < n; ++k) {
      // The same operations in the same order as torch.optim's _single_tensor_adam(w).
      const float grad = l2 != 0.0f ? gw[k] + l2 * pw[k] : gw[k];
      const float param = shrink != 1.0f ? pw[k] * shrink : pw[k];
      m[k] = m[k] * b1 + one_minus_b1 * grad;
      v[k] = v[k] * b2 + one_minus_b2 * grad * grad;
      const float denom = std::sqrt(v[k]) / bias2_sqrt + eps;
      pw[k] = param + neg_step_size * m[k] / denom;
    }
  }
}

}  // namespace cmha::optim
