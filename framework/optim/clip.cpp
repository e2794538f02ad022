#include "optim/clip.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "optim/param_label.h"
#include "tensor/error.h"

namespace cmha::optim {
namespace {

// The unit of parallel work and of the fixed summation order.
constexpr int64_t kBlock = int64_t{1} << 16;
constexpr int64_t kParallelMin = 32768;

struct Block {
  float* data;
  int64_t n;
};

// The gradients split into blocks of at most kBlock elements, in parameter
// order. A non-contiguous gradient is replaced by a contiguous copy first
// (the same values), so that clipping can scale it in place.
std::vector<Block> gradient_blocks(const std::vector<Tensor>& params, const char* op, int64_t* total) {
  std::vector<Block> blocks;
  *total = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    CMHA_CHECK(p.defined(), std::string(op) + ": " + label(p, i) + " is an undefined tensor");
    Tensor g = p.grad();
    if (!g.defined()) continue;
    CMHA_CHECK(g.dtype() == DType::f32 && g.device().is_cpu() && g.shape() == p.shape(),
               std::string(op) + ": the gradient of " + label(p, i) + " is " + layout(g) + " but the parameter is " +
                   layout(p) + "; only f32 CPU gradients of the parameter's shape are supported");
    if (!g.is_contiguous()) {
      g = g.contiguous();
      Tensor(p).set_grad(g);
    }
    float* data = g.data<float>();
    const int64_t n = g.numel();
    for (int64_t b = 0; b < n; b += kBlock) blocks.push_back({data + b, std::min(kBlock, n - b)});
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

double norm_of(const std::vector<Block>& blocks, int64_t total) {
  const int64_t nb = static_cast<int64_t>(blocks.size());
  std::vector<double> sums(blocks.size(), 0.0);
#pragma omp parallel for schedule(static) if (total > kParallelMin)
  for (int64_t b = 0; b < nb; ++b) sums[b] = block_sum_sq(blocks[b].data, blocks[b].n);
  double sum = 0.0;
  for (double s : sums) sum += s;  // fixed order: independent of the thread count
  return std::sqrt(sum);
}

}  // namespace

double grad_norm(const std::vector<Tensor>& params) {
  int64_t total = 0;
  std::vector<Block> blocks = gradient_blocks(params, "grad_norm", &total);
  return norm_of(blocks, total);
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  if (!(std::isfinite(max_norm) && max_norm > 0.0)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", max_norm);
    throw Error(std::string("clip_grad_norm: max_norm ") + buf + " must be a positive finite number");
  }
  int64_t total = 0;
  std::vector<Block> blocks = gradient_blocks(params, "clip_grad_norm", &total);
  const double norm = norm_of(blocks, total);
  if (!std::isfinite(norm)) return norm;  // the trainer skips this update
  const double coef = max_norm / (norm + 1e-6);
  if (coef >= 1.0) return norm;
  const float c = static_cast<float>(coef);
  const int64_t nb = static_cast<int64_t>(blocks.size());
#pragma omp parallel for schedule(static) if (total > kParallelMin)
  for (int64_t b = 0; b < nb; ++b) {
    float* x = blocks[b].data;
    const int64_t n = blocks[b].n;
#pragma omp simd
    for (int64_t k = 0; k < n; ++k) x[k] *= c;
  }
  return norm;
}

bool all_finite(const std::vector<Tensor>& params) {
  int64_t total = 0;
  std::vector<Block> blocks = gradient_blocks(params, "all_finite", &total);
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

}  // namespace cmha::optim
