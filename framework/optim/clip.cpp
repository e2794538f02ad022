#include "optim/clip.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "backend/kernels.h"
#include "optim/param_label.h"
#include "tensor/error.h"

namespace cmha::optim {
namespace {

// The gradients of `params` that are defined, in parameter order, each
// contiguous (a non-contiguous one is replaced by a contiguous copy first, the
// same values, so that clipping can scale it in place), and their device.
std::vector<Tensor> gradients(const std::vector<Tensor>& params, const char* op, Device* dev) {
  std::vector<Tensor> grads;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    CMHA_CHECK(p.defined(), std::string(op) + ": " + label(p, i) + " is an undefined tensor");
    Tensor g = p.grad();
    if (!g.defined()) continue;
    CMHA_CHECK(g.dtype() == DType::f32 && g.device() == p.device() && g.shape() == p.shape(),
               std::string(op) + ": the gradient of " + label(p, i) + " is " + layout(g) + " but the parameter is " +
                   layout(p) + "; only f32 gradients of the parameter's shape and device are supported");
    if (!g.is_contiguous()) {
      g = g.contiguous();
      Tensor(p).set_grad(g);
    }
    *dev = grads.empty() ? g.device() : common_device(op, {grads.front(), g});
    grads.push_back(g);
  }
  return grads;
}

}  // namespace

double grad_norm(const std::vector<Tensor>& params) {
  Device dev = Device::cpu();
  const std::vector<Tensor> grads = gradients(params, "grad_norm", &dev);
  return std::sqrt(CMHA_KERNEL(dev, optim.sum_squares)(grads));
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  if (!(std::isfinite(max_norm) && max_norm > 0.0)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", max_norm);
    throw Error(std::string("clip_grad_norm: max_norm ") + buf + " must be a positive finite number");
  }
  Device dev = Device::cpu();
  const std::vector<Tensor> grads = gradients(params, "clip_grad_norm", &dev);
  const double norm = std::sqrt(CMHA_KERNEL(dev, optim.sum_squares)(grads));
  if (!std::isfinite(norm)) return norm;  // the trainer skips this update
  const double coef = max_norm / (norm + 1e-6);
  if (coef >= 1.0) return norm;
  CMHA_KERNEL(dev, optim.scale)(grads, static_cast<float>(coef));
  for (const Tensor& g : grads) g.bump_version();
  return norm;
}

Tensor clip_grad_norm_on_device(const std::vector<Tensor>& params, double max_norm) {
  if (!(std::isfinite(max_norm) && max_norm >= 0.0)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", max_norm);
    throw Error(std::string("clip_grad_norm: max_norm ") + buf + " must be a finite number >= 0 (0: no clipping)");
  }
  Device dev = params.empty() || !params.front().defined() ? Device::cpu() : params.front().device();
  const std::vector<Tensor> grads = gradients(params, "clip_grad_norm", &dev);
  Tensor norm = Tensor::empty({1}, DType::i64, dev);  // the double's bits (cmha has no f64 dtype)
  CMHA_KERNEL(dev, optim.clip_grad_norm)(grads, max_norm, norm);
  if (max_norm > 0.0)
    for (const Tensor& g : grads) g.bump_version();  // scaled or not: the host does not know
  return norm;
}

double norm_of(const Tensor& host_norm_bits) {
  CMHA_CHECK(host_norm_bits.dtype() == DType::i64 && host_norm_bits.numel() == 1,
             "norm_of: " + host_norm_bits.describe() + " is not a norm written by clip_grad_norm_on_device");
  double norm = 0;
  std::memcpy(&norm, host_norm_bits.data<int64_t>("norm_of"), sizeof norm);
  return norm;
}

bool all_finite(const std::vector<Tensor>& params) {
  Device dev = Device::cpu();
  const std::vector<Tensor> grads = gradients(params, "all_finite", &dev);
  return CMHA_KERNEL(dev, optim.all_finite)(grads);
}

bool values_finite(const std::vector<Tensor>& xs) {
  if (xs.empty()) return true;
  return CMHA_KERNEL(xs.front().device(), optim.all_finite)(xs);
}

}  // namespace cmha::optim
