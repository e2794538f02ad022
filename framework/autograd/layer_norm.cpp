// layer_norm over the last dim, forward and backward: the checks and the
// autograd record; the loops are the layer_norm kernels (backend/layer_norm.h).
// The forward saves each row's mean and rstd for the backward pass.
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/kernels.h"

namespace cmha {

namespace {

void check_affine(const Tensor& p, const char* what, const Tensor& x, int64_t d) {
  if (!p.defined()) return;
  CMHA_CHECK(p.dtype() == DType::f32 && p.shape() == Shape{d},
             std::string("layer_norm: ") + what + " must be f32[" + std::to_string(d) +
                 "] to match the last dim of the input " + x.describe() + ", got " + p.describe());
}

// What the backward pass keeps from the forward.
struct Saved {
  autograd::SavedTensor x, weight;  // x contiguous [rows, D]; weight [D] or undefined
  Tensor mean, rstd;                // [rows], the op's own buffers
  int64_t d;
  bool need_dx, need_w, need_b;
};

std::vector<Tensor> layer_norm_backward(const Saved& s, const Tensor& g) {
  const Tensor& x = s.x.get("layer_norm backward");
  const Tensor& weight = s.weight.get("layer_norm backward");
  const Device dev = common_device("layer_norm backward", {x, g});
  Tensor gc = g.is_contiguous() ? g : g.contiguous();
  Tensor dx = s.need_dx ? Tensor::empty(x.shape(), x.dtype(), dev) : Tensor();
  Tensor dw = s.need_w ? Tensor::empty({s.d}, DType::f32, dev) : Tensor();
  Tensor db = s.need_b ? Tensor::empty({s.d}, DType::f32, dev) : Tensor();
  CMHA_KERNEL(dev, layer_norm.backward)(x, weight, gc, s.mean, s.rstd, dx, dw, db);
  return {dx, dw, db};
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  // x f32 or bf16 (statistics in f32/double either way); y and dx keep its dtype.
  CMHA_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::bf16,
             "layer_norm: expected f32 or bf16, got " + x.describe());
  const Device dev = common_device("layer_norm", {x, weight, bias});
  CMHA_CHECK(x.dim() >= 1, "layer_norm: expected an input with at least one dim, got " + x.describe());
  CMHA_CHECK(eps >= 0.0f, "layer_norm: eps must be >= 0, got " + number_str(eps));
  const int64_t d = x.shape().back();
  check_affine(weight, "weight", x, d);
  check_affine(bias, "bias", x, d);
  int64_t rows = 1;
  for (int64_t i = 0; i + 1 < x.dim(); ++i) rows *= x.shape()[i];

  Tensor xc = x.is_contiguous() ? x : x.detach().contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), dev);
  Tensor mean = Tensor::empty({rows}, DType::f32, dev), rstd = Tensor::empty({rows}, DType::f32, dev);
  CMHA_KERNEL(dev, layer_norm.forward)(xc, weight, bias, out, mean, rstd, eps);

  if (autograd::needs_grad({x, weight, bias})) {
    Saved saved{autograd::SavedTensor(xc.detach()),
                autograd::SavedTensor(weight.defined() ? weight.detach() : Tensor()), mean, rstd, d,
                x.requires_grad(), weight.defined() && weight.requires_grad(),
                bias.defined() && bias.requires_grad()};
    autograd::record(out, "layer_norm", {x, weight, bias},
                     [saved](const Tensor& g) { return layer_norm_backward(saved, g); });
  }
  return out;
}

}  // namespace cmha
