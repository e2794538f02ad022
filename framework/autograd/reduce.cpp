// Reductions: sum, mean, max, argmax.
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/kernels.h"

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

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  CMHA_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::bf16, "sum: expected f32 or bf16, got " + x.describe());
  const Device dev = common_device("sum", {x});
  const ReducePlan p = plan_reduce(x, dims, "sum");
  Tensor out = Tensor::empty(keepdim ? p.out_keepdim : p.out_squeezed, DType::f32, dev);
  CMHA_KERNEL(dev, reduce.sum)(x, p.reduced, out);
  if (autograd::needs_grad({x})) {
    Shape in_shape = x.shape(), kd = p.out_keepdim;
    autograd::record(out, "sum", {x}, [in_shape, kd, dtype = x.dtype()](const Tensor& g) {
      return std::vector<Tensor>{g.reshape(kd).expand(in_shape).contiguous().to(dtype)};
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
std::pair<Tensor, Tensor> max_values_indices(const Tensor& x, int64_t dim, const char* op) {
  x.check_dtype(DType::f32, op);
  const Device dev = common_device(op, {x});
  dim = x.wrap_dim(dim, op);
  CMHA_CHECK(x.shape()[dim] > 0, std::string(op) + ": dim " + std::to_string(dim) + " of " + x.describe() +
                                     " is empty");
  Shape out_shape = x.shape();
  out_shape.erase(out_shape.begin() + dim);
  Tensor values = Tensor::empty(out_shape, DType::f32, dev), indices = Tensor::empty(out_shape, DType::i64, dev);
  CMHA_KERNEL(dev, reduce.max)(x, dim, values, indices);
  return {values, indices};
}
}  // namespace

Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  // Not a structured binding: clang before 16 cannot capture one in the lambda below.
  Tensor values, indices;
  std::tie(values, indices) = max_values_indices(x, dim, "max");
  const int64_t d = x.wrap_dim(dim, "max");
  if (keepdim) values = values.unsqueeze(d);
  if (autograd::needs_grad({x})) {
    Shape in_shape = x.shape();
    autograd::record(values, "max", {x}, [in_shape, indices, d, keepdim](const Tensor& g) {
      // Route each gradient to the position of its maximum.
      const Device dev = common_device("max backward", {g, indices});
      Tensor grad = Tensor::zeros(in_shape, DType::f32, dev);
      CMHA_KERNEL(dev, reduce.max_backward)(keepdim ? g : g.unsqueeze(d), indices.unsqueeze(d), d, grad);
      return std::vector<Tensor>{grad};
    });
  }
  return values;
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  auto [values, indices] = max_values_indices(x, dim, "argmax");
  return keepdim ? indices.unsqueeze(x.wrap_dim(dim, "argmax")) : indices;
}

}  // namespace cmha
