#pragma once
// Kernel-table entries: optim (see backend/kernels.h). Each entry's comment says
// what it computes, the dtypes and layouts it accepts, and who allocates what.
//
// The optimisers (optim/adam.cpp, sgd.cpp), the weight average (optim/ema.cpp)
// and gradient clipping (optim/clip.cpp) work out their scalars in double on
// the host, round them to f32 where PyTorch does, and hand them to these
// entries. Every entry updates tensors the caller gives it, in place; none
// allocates a tensor.
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace cmha::backend {

// The f32 scalars of one Adam/AdamW step of one parameter (optim/adam.cpp
// derives them from the options and the parameter's step count).
struct AdamStep {
  float l2 = 0.0f;            // Adam: g ← g + l2·p (0: no L2 term)
  float shrink = 1.0f;        // AdamW: p ← p·shrink before the update (1: none)
  float beta1 = 0.9f, one_minus_beta1 = 0.1f;
  float beta2 = 0.999f, one_minus_beta2 = 0.001f;
  float bias2_sqrt = 1.0f;    // √(1 - β2ᵗ)
  float neg_step_size = 0.0f; // -lr/(1 - β1ᵗ)
  float eps = 1e-8f;
};

// The f32 scalars of one SGD step of one parameter (optim/sgd.cpp).
struct SgdStep {
  float weight_decay = 0.0f;    // g ← g + wd·p (0: none)
  float momentum = 0.0f;        // μ
  float one_minus_dampening = 1.0f;
  float neg_lr = 0.0f;          // -lr
  bool nesterov = false;
  bool first = false;           // the buffer's first step: b ← g instead of μ·b + (1 - dampening)·g
};

// The gate of a step (the trainer's skip of a non-finite update, decided on
// the device so that the host never waits for it): undefined, or an i64 [1]
// tensor on the parameter's device holding the bits of a double (cmha has no
// f64 dtype), the gradients' norm that clip_grad_norm wrote. adam_step,
// sgd_step and ema_update change nothing when that double is not finite.
struct OptimKernels {
  // One Adam/AdamW step of one parameter, in place, the operations of
  // torch.optim's _single_tensor_adam(w) per element:
  //   g' = g + l2·p;  p' = p·shrink;  m ← β1·m + (1-β1)·g';  v ← β2·v + (1-β2)·g'²
  //   p ← p' + neg_step_size·m / (√v/bias2_sqrt + eps)
  // and, when param_bf16 is defined, param_bf16 ← bf16(p) (round to nearest
  // even, the bits of a conversion) in the same pass: the bf16 working copy
  // of the f32 master (backend/working_copy.h).
  // param, grad, exp_avg, exp_avg_sq: contiguous f32 of one shape on one
  // device; param_bf16: undefined or contiguous bf16 of that shape there.
  void (*adam_step)(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                    const Tensor& param_bf16, const AdamStep& s, const Tensor& gate) = nullptr;
  // One SGD step of one parameter, in place, as torch.optim's _single_tensor_sgd:
  //   d = g + wd·p;  with a buffer: b ← first ? d : μ·b + (1-dampening)·d,  d ← nesterov ? d + μ·b : b
  //   p ← p + neg_lr·d
  // param, grad and momentum_buffer (undefined: no momentum) contiguous f32 of one shape on one device.
  void (*sgd_step)(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& s,
                   const Tensor& gate) = nullptr;
  // shadow ← shadow·decay + one_minus_decay·param (timm's ModelEmaV2), in place;
  // both contiguous f32 of one shape on one device.
  void (*ema_update)(const Tensor& shadow, const Tensor& param, float decay, float one_minus_decay,
                     const Tensor& gate) = nullptr;
  // Exchanges the elements of a and b, in place; contiguous f32 of one shape on one device.
  void (*swap)(const Tensor& a, const Tensor& b) = nullptr;

  // The gradient-clipping reductions, over a list of tensors (the gradients of
  // a model), each contiguous f32 on one device; an empty list is allowed.
  //
  // Σ x² over every element of every tensor, accumulated in double over fixed
  // blocks of elements and the block sums added in a fixed order, so the
  // result is the same bit for bit whatever the thread count. Returned on the
  // host (a device implementation synchronises).
  double (*sum_squares)(const std::vector<Tensor>& xs) = nullptr;
  // True when every element of every tensor is finite (host value).
  bool (*all_finite)(const std::vector<Tensor>& xs) = nullptr;
  // x ← x·c for every element of every tensor, in place.
  void (*scale)(const std::vector<Tensor>& xs, float c) = nullptr;
  // optim/clip.h's clipping on the device, the host never waiting for it:
  //   norm = √(sum_squares(xs)) (double), written to `norm` (i64 [1] on the
  //   tensors' device, preallocated: the double's bits, a step's gate);
  //   when max_norm > 0, norm is finite and c = max_norm/(norm + 1e-6) < 1,
  //   every x ← x·float(c). max_norm 0: the norm only.
  void (*clip_grad_norm)(const std::vector<Tensor>& xs, double max_norm, const Tensor& norm) = nullptr;
};

}  // namespace cmha::backend
