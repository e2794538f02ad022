// Tensor's methods that copy and may record autograd history (the views are
// in view.cpp), and the host reads built on them.
#include "autograd/engine.h"
#include "tensor/tensor.h"

namespace cmha {

Tensor Tensor::clone() const {
  Tensor out = Tensor::empty(shape(), dtype(), device());
  out.copy_(*this);
  if (autograd::needs_grad({*this}))
    autograd::record(out, "clone", {*this}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
  return out;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = Tensor::empty(shape(), target, device());
  out.copy_(*this);
  if (is_floating(target) && is_floating(dtype()) && autograd::needs_grad({*this})) {
    const DType source = dtype();
    autograd::record(out, "to_dtype", {*this}, [source](const Tensor& g) { return std::vector<Tensor>{g.to(source)}; });
  }
  return out;
}

float Tensor::item() const {
  CMHA_CHECK(numel() == 1, "item: expected a one-element tensor, got " + describe());
  return to_float_vector()[0];
}

// Device memory comes to the host first; then one contiguous cast there.
std::vector<float> Tensor::to_float_vector() const {
  autograd::NoGradGuard no_grad;
  Tensor c = to(Device::cpu()).contiguous().to(DType::f32);
  const float* p = c.data<float>("to_float_vector");
  return std::vector<float>(p, p + c.numel());
}

std::vector<int64_t> Tensor::to_i64_vector() const {
  autograd::NoGradGuard no_grad;
  Tensor c = to(Device::cpu()).contiguous().to(DType::i64);
  const int64_t* p = c.data<int64_t>("to_i64_vector");
  return std::vector<int64_t>(p, p + c.numel());
}

}  // namespace cmha
