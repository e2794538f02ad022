// Reductions: sum, mean, max, argmax.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "autograd/engine.h"
#include "autograd/ops.h"

namespace cmha {

namespace {

struct ReducePlan {
  std::vector<int64_t> kept, reduced;  // dims, in order
  Shape out_keepdim, out_squeezed;
  int64_t outer = 1, inner = 1;  // kept elements, reduced elements per kept element
};

ReducePlan plan_reduce(const Tensor& x, const std::vector<int64_t>& dims, const char* op) {
  ReducePlan p;
  std::vector<bool> is_reduced(x.dim(), false);
  for (int64_t d : dims) {
    const int64_t w = x.wrap_dim(d, op);
    CMHA_CHECK(!is_reduced[w], std::string(op) + ": dim " + std::to_string(w) + " listed twice");
    is_reduced[w] = true;
  }
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (is_reduced[i]) {
      p.reduced.push_back(i);
      p.out_keepdim.push_back(1);
      p.inner *= x.shape()[i];
    } else {
      p.kept.push_back(i);
      p.out_keepdim.push_back(x.shape()[i]);
      p.out_squeezed.push_back(x.shape()[i]);
      p.outer *= x.shape()[i];
    }
  }
  return p;
}

// Sums x (f32) over the planned dims into out[outer], accumulating in double.
void sum_kernel(const Tensor& x, const ReducePlan& p, float* out) {
  // Leading dims reduced on a contiguous tensor: column sums (bias gradients).
  bool leading = x.is_contiguous();
  for (size_t i = 0; i < p.reduced.size(); ++i) leading = leading && p.reduced[i] == static_cast<int64_t>(i);
  if (leading && !p.reduced.empty() && !p.kept.empty()) {
    const float* px = x.data<float>();
    const int64_t rows = p.inner, cols = p.outer;
    constexpr int64_t kBlock = 256;
#pragma omp parallel for schedule(static) if (rows * cols >= 32768)
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      const int64_t c1 = std::min(cols, c0 + kBlock);
      double acc[kBlock] = {};
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = px + r * cols;
        for (int64_t c = c0; c < c1; ++c) acc[c - c0] += row[c];
      }
      for (int64_t c = c0; c < c1; ++c) out[c] = static_cast<float>(acc[c - c0]);
    }
    return;
  }
  // Otherwise bring the reduced dims last and sum rows.
  std::vector<int64_t> order = p.kept;
  order.insert(order.end(), p.reduced.begin(), p.reduced.end());
  Tensor xc = x.permute(order).contiguous();
  const float* px = xc.data<float>();
  const int64_t outer = p.outer, inner = p.inner;
#pragma omp parallel for schedule(static) if (outer * inner >= 32768 && outer > 1)
  for (int64_t o = 0; o < outer; ++o) {
    const float* row = px + o * inner;
    double acc = 0.0;
    for (int64_t i = 0; i < inner; ++i) acc += row[i];
    out[o] = static_cast<float>(acc);
  }
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  x.check_dtype(DType::f32, "sum");
  x.check_cpu("sum");
  const ReducePlan p = plan_reduce(x, dims, "sum");
  Tensor out = Tensor::empty(keepdim ? p.out_keepdim : p.out_squeezed);
  {
    autograd::NoGradGuard no_grad;
    sum_kernel(x, p, out.data<float>());
  }
  if (autograd::needs_grad({x})) {
    Shape in_shape = x.shape(), kd = p.out_keepdim;
    autograd::record(out, "sum", {x}, [in_shape, kd](const Tensor& g) {
      return std::vector<Tensor>{g.reshape(kd).expand(in_shape).contiguous()};
    });
  }
  return out;
}

Tensor sum(const Tensor& x) {
  std::vector<int64_t> all(x.dim());
  std::iota(all.begin(), all.end(), 0);
  return sum(x, all, false);
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const ReducePlan p = plan_reduce(x, dims, "mean");
  CMHA_CHECK(p.inner > 0, "mean: reducing over zero elements of " + x.describe());
  return mul_scalar(sum(x, dims, keepdim), 1.0f / static_cast<float>(p.inner));
}

Tensor mean(const Tensor& x) {
  std::vector<int64_t> all(x.dim());
  std::iota(all.begin(), all.end(), 0);
  return mean(x, all, false);
}

namespace {
// Values and first-max indices along `dim` (f32 input).
std::pair<Tensor, Tensor> max_kernel(const Tensor& x, int64_t dim, const char* op) {
  x.check_dtype(DType::f32, op);
  x.check_cpu(op);
  dim = x.wrap_dim(dim, op);
  CMHA_CHECK(x.shape()[dim] > 0, std::string(op) + ": dim " + std::to_string(dim) + " of " + x.describe() +
                                     " is empty");
  autograd::NoGradGuard no_grad;
  Tensor xc = x.transpose(dim, -1).contiguous();
  Shape out_shape = xc.shape();
  const int64_t inner = out_shape.back();
  out_shape.pop_back();
  Tensor values = Tensor::empty(out_shape), indices = Tensor::empty(out_shape, DType::i64);
  const float* px = xc.data<float>();
  float* pv = values.data<float>();
  int64_t* pi = indices.data<int64_t>();
  const int64_t outer = values.numel();
#pragma omp parallel for schedule(static) if (outer * inner >= 32768)
  for (int64_t o = 0; o < outer; ++o) {
    const float* row = px + o * inner;
    int64_t best = 0;
    for (int64_t i = 1; i < inner; ++i)
      if (row[i] > row[best] || (std::isnan(row[i]) && !std::isnan(row[best]))) best = i;
    pv[o] = row[best];
    pi[o] = best;
  }
  // Shapes: [..., (dim moved last) ...] without that dim; restore the order.
  if (dim != x.dim() - 1 && x.dim() > 1) {
    values = values.unsqueeze(-1).transpose(dim, -1).squeeze(dim).contiguous();
    indices = indices.unsqueeze(-1).transpose(dim, -1).squeeze(dim).contiguous();
  }
  return {values, indices};
}
}  // namespace

Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  auto [values, indices] = max_kernel(x, dim, "max");
  const int64_t d = x.wrap_dim(dim, "max");
  if (keepdim) values = values.unsqueeze(d);
  if (autograd::needs_grad({x})) {
    Shape in_shape = x.shape();
    autograd::record(values, "max", {x}, [in_shape, indices, d, keepdim](const Tensor& g) {
      // Route each gradient to the position of its maximum.
      Tensor grad = Tensor::zeros(in_shape);
      Tensor gk = (keepdim ? g : g.unsqueeze(d)).contiguous();
      Tensor idx = indices.unsqueeze(d);
      Tensor gt = grad.transpose(d, -1);  // view: [..., n]
      Tensor gkt = gk.transpose(d, -1).contiguous(), it = idx.transpose(d, -1).contiguous();
      Tensor gtc = gt.contiguous();
      float* pg = gtc.data<float>();
      const float* pv = gkt.data<float>();
      const int64_t* pi = it.data<int64_t>();
      const int64_t n = gtc.shape().back(), rows = it.numel();
      for (int64_t r = 0; r < rows; ++r) pg[r * n + pi[r]] += pv[r];
      gt.copy_(gtc);
      return std::vector<Tensor>{grad};
    });
  }
  return values;
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  auto [values, indices] = max_kernel(x, dim, "argmax");
  return keepdim ? indices.unsqueeze(x.wrap_dim(dim, "argmax")) : indices;
}

}  // namespace cmha
