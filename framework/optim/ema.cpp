#include "optim/ema.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "backend/kernels.h"
#include "optim/param_label.h"
#include "tensor/error.h"

namespace cmha::optim {
namespace {

void check_param(const Tensor& p, size_t i) {
  CMHA_CHECK(p.defined(), "EMA: " + label(p, i) + " is an undefined tensor");
  CMHA_CHECK(p.dtype() == DType::f32 && p.is_contiguous(),
             "EMA: " + label(p, i) + " is " + layout(p) + "; only contiguous f32 parameters are supported");
}

EmaOptions with_decay(double decay) {
  EmaOptions o;
  o.decay = decay;
  return o;
}

}  // namespace

ExponentialMovingAverage::ExponentialMovingAverage(const std::vector<Tensor>& params, double decay)
    : ExponentialMovingAverage(params, with_decay(decay)) {}

ExponentialMovingAverage::ExponentialMovingAverage(const std::vector<Tensor>& params, EmaOptions options)
    : options_(options), params_(params) {
  if (!(options_.decay >= 0.0 && options_.decay <= 1.0)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", options_.decay);
    throw Error(std::string("EMA: decay ") + buf + " must lie in [0, 1]");
  }
  shadow_.reserve(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    check_param(params_[i], i);
    shadow_.push_back(params_[i].detach().clone());
  }
}

double ExponentialMovingAverage::current_decay() const {
  if (!options_.warmup) return options_.decay;
  const double n = static_cast<double>(updates_);
  return std::min(options_.decay, (1.0 + n) / (10.0 + n));
}

void ExponentialMovingAverage::set_updates(int64_t n) {
  CMHA_CHECK(n >= 0, "EMA: update count " + std::to_string(n) + " is negative");
  updates_ = n;
}

void ExponentialMovingAverage::update(const Tensor& gate) {
  CMHA_CHECK(!swapped_, "EMA: update() while the averaged weights are swapped in; call swap() first");
  const double decay = current_decay();
  // timm: ema·decay + (1 - decay)·param, both scalars as f32.
  const float d = static_cast<float>(decay);
  const float one_minus_d = static_cast<float>(1.0 - decay);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Device dev = common_device("EMA", {params_[i], shadow_[i]});
    CMHA_KERNEL(dev, optim.ema_update)(shadow_[i], params_[i], d, one_minus_d, gate);
    shadow_[i].bump_version();
  }
  ++updates_;
}

void ExponentialMovingAverage::swap() {
  for (size_t i = 0; i < params_.size(); ++i) {
    const Device dev = common_device("EMA", {params_[i], shadow_[i]});
    CMHA_KERNEL(dev, optim.swap)(params_[i], shadow_[i]);
    params_[i].bump_version();  // a graph recorded before the swap must not backpropagate after it
    shadow_[i].bump_version();
  }
  swapped_ = !swapped_;
}

void ExponentialMovingAverage::copy_to(const std::vector<Tensor>& params) const {
  CMHA_CHECK(params.size() == shadow_.size(), "EMA: copy_to got " + std::to_string(params.size()) +
                                                  " tensors but the average tracks " +
                                                  std::to_string(shadow_.size()));
  for (size_t i = 0; i < params.size(); ++i) {
    CMHA_CHECK(params[i].defined(), "EMA: copy_to destination " + label(params[i], i) + " is an undefined tensor");
    CMHA_CHECK(params[i].shape() == shadow_[i].shape(),
               "EMA: copy_to destination " + label(params[i], i) + " is " + layout(params[i]) +
                   " but the average is " + layout(shadow_[i]));
    // While swapped, the averaged weights are in the tracked parameters.
    const Tensor& src = swapped_ ? params_[i] : shadow_[i];
    if (!params[i].same(src)) Tensor(params[i]).copy_(src);
  }
}

}  // namespace cmha::optim
