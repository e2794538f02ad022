// CPU kernels: reduce (entries of backend/reduce.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/element.h"
#include "backend/cpu/kernel_table.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/vec_math.h"

namespace cmha::cpu {

namespace {

// `t` without autograd history, for the scratch views and copies below.
Tensor untracked(const Tensor& t) { return t.requires_grad() ? t.detach() : t; }

// Sums x (f32) over the `reduced` dims into out[outer], accumulating in double.
void sum(const Tensor& x, const std::vector<int64_t>& reduced, const Tensor& out_t) {
  int64_t outer = 1, inner = 1;  // kept elements, reduced elements per kept element
  for (int64_t i = 0, k = 0; i < x.dim(); ++i) {
    if (k < static_cast<int64_t>(reduced.size()) && reduced[k] == i) {
      inner *= x.shape()[i];
      ++k;
    } else {
      outer *= x.shape()[i];
    }
  }
  const bool any_kept = static_cast<int64_t>(reduced.size()) < x.dim();
  float* out = out_t.data<float>();
  // Leading dims reduced on a contiguous tensor: column sums (bias gradients).
  bool leading = x.is_contiguous();
  for (size_t i = 0; i < reduced.size(); ++i) leading = leading && reduced[i] == static_cast<int64_t>(i);
  if (leading && !reduced.empty() && any_kept) {
    with_float_type(x.dtype(), "reduce.sum", [&](auto tx) {  // f32 or bf16 (a bf16 layer's bias gradient)
      using X = decltype(tx);
      const X* px = x.data<X>("reduce.sum");
      const int64_t rows = inner, cols = outer;
      constexpr int64_t kBlock = 256;
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
      for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
        const int64_t c1 = std::min(cols, c0 + kBlock);
        double acc[kBlock] = {};
        for (int64_t r = 0; r < rows; ++r) {
          const X* row = px + r * cols;
          for (int64_t c = c0; c < c1; ++c) acc[c - c0] += ld(row[c]);
        }
        for (int64_t c = c0; c < c1; ++c) out[c] = static_cast<float>(acc[c - c0]);
      }
    });
    return;
  }
  // Otherwise bring the reduced dims last and sum rows.
  std::vector<int64_t> order;
  for (int64_t i = 0, k = 0; i < x.dim(); ++i) {
    if (k < static_cast<int64_t>(reduced.size()) && reduced[k] == i) ++k;
    else order.push_back(i);
  }
  order.insert(order.end(), reduced.begin(), reduced.end());
  Tensor xc = untracked(x).permute(order).contiguous().to(DType::f32);
  const float* px = xc.data<float>();
#pragma omp parallel for schedule(static) if (outer * inner >= kParallelMin && outer > 1)
  for (int64_t o = 0; o < outer; ++o) {
    const float* row = px + o * inner;
    double acc = 0.0;
    for (int64_t i = 0; i < inner; ++i) acc += row[i];
    out[o] = static_cast<float>(acc);
  }
}

// Values and first-max indices along `dim` (f32 input).
void max(const Tensor& x, int64_t dim, const Tensor& values_out, const Tensor& indices_out) {
  Tensor xc = untracked(x).transpose(dim, -1).contiguous();
  Shape out_shape = xc.shape();
  const int64_t inner = out_shape.back();
  out_shape.pop_back();
  // With `dim` last the rows land in the outputs' order; otherwise they come
  // out with the last dim moved to `dim`, and are put back in order below.
  const bool direct = dim == x.dim() - 1 || x.dim() <= 1;
  Tensor values = direct ? values_out : Tensor::empty(out_shape);
  Tensor indices = direct ? indices_out : Tensor::empty(out_shape, DType::i64);
  const float* px = xc.data<float>();
  float* pv = values.data<float>();
  int64_t* pi = indices.data<int64_t>();
  const int64_t outer = values.numel();
#pragma omp parallel for schedule(static) if (outer * inner >= kParallelMin)
  for (int64_t o = 0; o < outer; ++o) {
    // The first maximal element, a NaN counting as the maximum (the first NaN
    // wins): a vectorised pass for the largest non-NaN value and for any NaN,
    // then a scan for the first element equal to it (or the first NaN). A
    // compare-and-keep-the-index loop stays scalar: ~1 ns an element.
    const float* row = px + o * inner;
    const float m = vec::row_max(row, inner);
    bool any_nan = false;
#pragma omp simd reduction(|| : any_nan)
    for (int64_t i = 0; i < inner; ++i) any_nan = any_nan || row[i] != row[i];
    int64_t best = 0;
    if (any_nan)
      while (row[best] == row[best]) ++best;
    else
      while (row[best] != m) ++best;
    pv[o] = row[best];
    pi[o] = best;
  }
  if (!direct) {
    Tensor vo = values_out, io = indices_out;
    vo.copy_(values.unsqueeze(-1).transpose(dim, -1).squeeze(dim));
    io.copy_(indices.unsqueeze(-1).transpose(dim, -1).squeeze(dim));
  }
}

// Routes each gradient to the position of its maximum.
void max_backward(const Tensor& g, const Tensor& indices, int64_t d, const Tensor& dx) {
  Tensor gk = untracked(g).contiguous();
  Tensor gt = dx.transpose(d, -1);  // view: [..., n]
  Tensor gkt = gk.transpose(d, -1).contiguous(), it = untracked(indices).transpose(d, -1).contiguous();
  Tensor gtc = gt.contiguous();
  float* pg = gtc.data<float>();
  const float* pv = gkt.data<float>();
  const int64_t* pi = it.data<int64_t>();
  const int64_t n = gtc.shape().back(), rows = it.numel();
  for (int64_t r = 0; r < rows; ++r) pg[r * n + pi[r]] += pv[r];
  gt.copy_(gtc);
}

void target_rank(const Tensor& z, const Tensor& target, const Tensor& rank) {
  const int64_t B = z.size(0), C = z.size(1);
  const float* pz = z.data<float>();
  const int64_t* y = target.data<int64_t>();
  int64_t* r = rank.data<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const float t = pz[b * C + y[b]];
    int64_t better = 0;
    for (int64_t c = 0; c < C; ++c) better += pz[b * C + c] > t;
    r[b] = better;
  }
}

}  // namespace

backend::ReduceKernels reduce_kernels() {
  backend::ReduceKernels k;
  k.sum = sum;
  k.max = max;
  k.max_backward = max_backward;
  k.target_rank = target_rank;
  return k;
}

}  // namespace cmha::cpu
