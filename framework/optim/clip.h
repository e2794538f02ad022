#pragma once
// Gradient-norm clipping, as torch.nn.utils.clip_grad_norm_ (L2 norm):
//   norm = ‖(g₁, g₂, …)‖₂ over every parameter that has a gradient
//   coef = max_norm / (norm + 1e-6);  if coef < 1: every g ← coef·g
// so a norm at or below max_norm - 1e-6 leaves the gradients untouched.
// Unlike torch, a non-finite norm (an inf or NaN gradient) leaves the
// gradients as they are and is returned as is: the trainer skips that update.
//
// The norm is accumulated in double over fixed blocks of elements, in
// parallel, and the block sums are added in a fixed order, so it is the same
// bit for bit whatever the thread count.
#include <vector>

#include "tensor/tensor.h"

namespace cmha::optim {

// The L2 norm of all the gradients (0 when none has one).
double grad_norm(const std::vector<Tensor>& params);

// Clips in place and returns the norm before clipping. max_norm must be
// positive (to disable clipping, call grad_norm instead).
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

// clip_grad_norm without a host wait: the kernels (backend/optim.h,
// optim.clip_grad_norm) scale the gradients on their device, and the norm
// before clipping stays there, returned as the bits of a double in an i64 [1]
// tensor (the gate of the optimiser's step: Optimizer::step). max_norm 0:
// the norm only. norm_of reads it once on the host (a CPU tensor). The same
// bits as clip_grad_norm / grad_norm on the CPU.
Tensor clip_grad_norm_on_device(const std::vector<Tensor>& params, double max_norm);
double norm_of(const Tensor& host_norm_bits);

// True when every element of every gradient is finite (parameters without a
// gradient are skipped).
bool all_finite(const std::vector<Tensor>& params);

// True when every element of every tensor (f32, one device) is finite: the
// trainer's check that weights are worth saving.
bool values_finite(const std::vector<Tensor>& xs);

}  // namespace cmha::optim
