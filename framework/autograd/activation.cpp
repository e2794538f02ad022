// ReLU and GELU (exact erf form and the tanh approximation): the checks and
// the autograd records; the loops are the activation kernels (backend/activation.h).
#include <string>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/kernels.h"

namespace cmha {

namespace {

// x as a contiguous f32 or bf16 tensor (a strided view is copied, outside
// autograd). The result and the gradient keep x's dtype.
Tensor contiguous_float(const Tensor& x, const char* op) {
  CMHA_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::bf16,
             std::string(op) + ": expected f32 or bf16, got " + x.describe());
  return x.is_contiguous() ? x : x.detach().contiguous();
}

}  // namespace

Tensor relu(const Tensor& x) {
  Tensor xc = contiguous_float(x, "relu");
  const Device dev = common_device("relu", {x});
  Tensor out = Tensor::empty(x.shape(), x.dtype(), dev);
  CMHA_KERNEL(dev, activation.relu)(xc, out);
  if (autograd::needs_grad({x}))
    autograd::record(out, "relu", {x}, [saved_y = autograd::SavedTensor(out.detach())](const Tensor& g) {
      const Tensor& y = saved_y.get("relu backward");
      const Device gdev = common_device("relu backward", {y, g});
      Tensor gc = g.is_contiguous() ? g : g.contiguous();
      Tensor dx = Tensor::empty(y.shape(), y.dtype(), gdev);
      CMHA_KERNEL(gdev, activation.relu_backward)(y, gc, dx);
      return std::vector<Tensor>{dx};
    });
  return out;
}

Tensor gelu(const Tensor& x, bool tanh_approximation) {
  Tensor xc = contiguous_float(x, "gelu");
  const Device dev = common_device("gelu", {x});
  Tensor out = Tensor::empty(x.shape(), x.dtype(), dev);
  CMHA_KERNEL(dev, activation.gelu)(xc, out, tanh_approximation);
  if (autograd::needs_grad({x}))
    autograd::record(out, "gelu", {x}, [saved_x = autograd::SavedTensor(xc.detach()), tanh_approximation](const Tensor& g) {
      const Tensor& xs = saved_x.get("gelu backward");
      const Device gdev = common_device("gelu backward", {xs, g});
      Tensor gc = g.is_contiguous() ? g : g.contiguous();
      Tensor dx = Tensor::empty(xs.shape(), xs.dtype(), gdev);
      CMHA_KERNEL(gdev, activation.gelu_backward)(xs, gc, dx, tanh_approximation);
      return std::vector<Tensor>{dx};
    });
  return out;
}

}  // namespace cmha
