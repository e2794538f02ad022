// CPU kernels: optim (entries of backend/optim.h): the optimiser steps, the
// weight average and the gradient-clipping reductions.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "backend/cpu/kernel_table.h"
#include "backend/cpu/parallel.h"

namespace cmha::cpu {
namespace {

// The per-parameter steps read and write three or four arrays per element,
// so they split across threads from half the usual size.
constexpr int64_t kStepParallelMin = kParallelMin / 2;

// False when a step's gate (backend/optim.h) holds a non-finite norm: the step changes nothing.
bool gate_open(const Tensor& gate) {
  if (!gate.defined()) return true;
  double norm = 0;
  std::memcpy(&norm, gate.data<int64_t>("optimizer step gate"), sizeof norm);
  return std::isfinite(norm);
}

// The loop of adam_step; with kBf16 it also stores the bf16 of each new value.
template <bool kBf16>
void adam_loop(float* pw, const float* gw, float* m, float* v, bf16* pb, int64_t n, const backend::AdamStep& s) {
  // Locals, so that the stores into the arrays cannot alias the scalars.
  const float l2 = s.l2, shrink = s.shrink;
  const float b1 = s.beta1, one_minus_b1 = s.one_minus_beta1;
  const float b2 = s.beta2, one_minus_b2 = s.one_minus_beta2;
  const float bias2_sqrt = s.bias2_sqrt, neg_step_size = s.neg_step_size, eps = s.eps;
#pragma omp parallel for schedule(static) if (n > kStepParallelMin)
  for (int64_t k = 0; k < n; ++k) {
    // The same operations in the same order as torch.optim's _single_tensor_adam(w).
    const float grad = l2 != 0.0f ? gw[k] + l2 * pw[k] : gw[k];
    const float param = shrink != 1.0f ? pw[k] * shrink : pw[k];
    m[k] = m[k] * b1 + one_minus_b1 * grad;
    v[k] = v[k] * b2 + one_minus_b2 * grad * grad;
    const float denom = std::sqrt(v[k]) / bias2_sqrt + eps;
    const float updated = param + neg_step_size * m[k] / denom;
    pw[k] = updated;
    if constexpr (kBf16) pb[k] = float_to_bf16(updated);
  }
}

void adam_step(const Tensor& param_t, const Tensor& grad_t, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& param_bf16, const backend::AdamStep& s, const Tensor& gate) {
  if (!gate_open(gate)) return;
  float* pw = param_t.data<float>("adam_step");
  const float* gw = grad_t.data<float>("adam_step");
  float* m = exp_avg.data<float>("adam_step");
  float* v = exp_avg_sq.data<float>("adam_step");
  const int64_t n = param_t.numel();
  if (param_bf16.defined()) {
    CMHA_CHECK(param_bf16.numel() == n && param_bf16.is_contiguous(),
               "adam_step: the bf16 copy " + param_bf16.describe() + " does not match " + param_t.describe());
    adam_loop<true>(pw, gw, m, v, param_bf16.data<bf16>("adam_step"), n, s);
  } else {
    adam_loop<false>(pw, gw, m, v, nullptr, n, s);
  }
}

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const backend::SgdStep& s,
              const Tensor& gate) {
  if (!gate_open(gate)) return;
  const float wd = s.weight_decay, mu = s.momentum, one_minus_damp = s.one_minus_dampening, neg_lr = s.neg_lr;
  const bool nesterov = s.nesterov, first = s.first;
  float* pw = param.data<float>("sgd_step");
  const float* gw = grad.data<float>("sgd_step");
  float* buf = momentum_buffer.defined() ? momentum_buffer.data<float>("sgd_step") : nullptr;
  const int64_t n = param.numel();
#pragma omp parallel for schedule(static) if (n > kStepParallelMin)
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

void ema_update(const Tensor& shadow, const Tensor& param, float decay, float one_minus_decay, const Tensor& gate) {
  if (!gate_open(gate)) return;
  const float d = decay, one_minus_d = one_minus_decay;
  const float* p = param.data<float>("ema_update");
  float* s = shadow.data<float>("ema_update");
  const int64_t n = param.numel();
#pragma omp parallel for schedule(static) if (n > kStepParallelMin)
  for (int64_t k = 0; k < n; ++k) s[k] = s[k] * d + one_minus_d * p[k];
}

void swap(const Tensor& a, const Tensor& b) {
  float* p = a.data<float>("swap");
  float* s = b.data<float>("swap");
  const int64_t n = a.numel();
#pragma omp parallel for schedule(static) if (n > kStepParallelMin)
  for (int64_t k = 0; k < n; ++k) std::swap(p[k], s[k]);
}

// ---- gradient clipping ----

// The unit of parallel work and of the fixed summation order.
constexpr int64_t kElementsPerBlock = int64_t{1} << 16;

struct Block {
  float* data;
  int64_t n;
};

// The tensors split into blocks of at most kElementsPerBlock elements, in list order.
std::vector<Block> blocks_of(const std::vector<Tensor>& xs, const char* op, int64_t* total) {
  std::vector<Block> blocks;
  *total = 0;
  for (const Tensor& x : xs) {
    float* data = x.data<float>(op);
    const int64_t n = x.numel();
    for (int64_t b = 0; b < n; b += kElementsPerBlock) blocks.push_back({data + b, std::min(kElementsPerBlock, n - b)});
    *total += n;
  }
  return blocks;
}

// Σ x² in double with eight interleaved partial sums (vectorisable, and a
// fixed order for a given block).
double block_sum_sq(const float* x, int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int j = 0; j < 8; ++j) {
      const double v = x[k + j];
      acc[j] += v * v;
    }
  double tail = 0.0;
  for (; k < n; ++k) tail += static_cast<double>(x[k]) * x[k];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

double sum_squares(const std::vector<Tensor>& xs) {
  int64_t total = 0;
  const std::vector<Block> blocks = blocks_of(xs, "sum_squares", &total);
  const int64_t nb = static_cast<int64_t>(blocks.size());
  std::vector<double> sums(blocks.size(), 0.0);
#pragma omp parallel for schedule(static) if (total > kParallelMin)
  for (int64_t b = 0; b < nb; ++b) sums[b] = block_sum_sq(blocks[b].data, blocks[b].n);
  double sum = 0.0;
  for (double s : sums) sum += s;  // fixed order: independent of the thread count
  return sum;
}

void scale(const std::vector<Tensor>& xs, float c) {
  int64_t total = 0;
  const std::vector<Block> blocks = blocks_of(xs, "scale", &total);
  const int64_t nb = static_cast<int64_t>(blocks.size());
#pragma omp parallel for schedule(static) if (total > kParallelMin)
  for (int64_t b = 0; b < nb; ++b) {
    float* x = blocks[b].data;
    const int64_t n = blocks[b].n;
#pragma omp simd
    for (int64_t k = 0; k < n; ++k) x[k] *= c;
  }
}

bool all_finite(const std::vector<Tensor>& xs) {
  int64_t total = 0;
  const std::vector<Block> blocks = blocks_of(xs, "all_finite", &total);
  const int64_t nb = static_cast<int64_t>(blocks.size());
  int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (total > kParallelMin)
  for (int64_t b = 0; b < nb; ++b) {
    const float* x = blocks[b].data;
    const int64_t n = blocks[b].n;
    // x·0 is 0 for a finite x and NaN for ±inf or NaN; the sum stays NaN.
    float probe = 0.0f;
#pragma omp simd reduction(+ : probe)
    for (int64_t k = 0; k < n; ++k) probe += x[k] * 0.0f;
    bad |= std::isnan(probe) ? 1 : 0;
  }
  return bad == 0;
}

void clip_grad_norm(const std::vector<Tensor>& xs, double max_norm, const Tensor& norm_bits) {
  const double norm = std::sqrt(sum_squares(xs));
  std::memcpy(norm_bits.data<int64_t>("clip_grad_norm"), &norm, sizeof norm);
  if (!(max_norm > 0.0) || !std::isfinite(norm)) return;  // a non-finite norm: the trainer's gate skips the step
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) scale(xs, static_cast<float>(coef));
}

}  // namespace

backend::OptimKernels optim_kernels() {
  return {
      .adam_step = adam_step,
      .sgd_step = sgd_step,
      .ema_update = ema_update,
      .swap = swap,
      .sum_squares = sum_squares,
      .all_finite = all_finite,
      .scale = scale,
      .clip_grad_norm = clip_grad_norm,
  };
}

}  // namespace cmha::cpu
