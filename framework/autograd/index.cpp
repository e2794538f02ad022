// Indexing ops: masked_fill, concat, split, gather.
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/cpu/dispatch.h"
#include "backend/cpu/strided.h"

namespace cmha {

namespace {

// out[i] = mask[i] ? value : x[i], any dtype, mask broadcast to x's shape.
Tensor masked_fill_kernel(const Tensor& x, const Tensor& mask, double value) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  const Shape so = out.strides(), sx = x.strides(), sm = cpu::broadcast_strides(mask, x.shape());
  const bool* pm = mask.data<bool>();
  CMHA_DISPATCH(x.dtype(), {
    const T fill = cpu::store_from_double<T>(value);
    const T* px = static_cast<const T*>(x.raw_data());
    T* po = out.data<T>();
    cpu::for_each_row<3>(x.shape(), {&so, &sx, &sm},
                         [&](const std::array<int64_t, 3>& base, int64_t n, const std::array<int64_t, 3>& step) {
                           T* o = po + base[0];
                           const T* xr = px + base[1];
                           const bool* mr = pm + base[2];
                           if (step[1] == 1 && step[2] == 1) {
                             _Pragma("omp simd")  // a #pragma may not sit inside CMHA_DISPATCH's argument
                             for (int64_t i = 0; i < n; ++i) o[i] = mr[i] ? fill : xr[i];
                           } else {
                             for (int64_t i = 0; i < n; ++i) o[i] = mr[i * step[2]] ? fill : xr[i * step[1]];
                           }
                         });
  });
  return out;
}

}  // namespace

Tensor masked_fill(const Tensor& x, const Tensor& mask, float value) {
  x.check_cpu("masked_fill");
  mask.check_cpu("masked_fill");
  CMHA_CHECK(mask.dtype() == DType::b8, "masked_fill: mask must be b8 (bool), got " + mask.describe());
  // Only the mask broadcasts: the result keeps x's shape.
  bool fits = mask.dim() <= x.dim();
  for (int64_t i = 1; fits && i <= mask.dim(); ++i) {
    const int64_t m = mask.shape()[mask.dim() - i], n = x.shape()[x.dim() - i];
    fits = m == n || m == 1;
  }
  CMHA_CHECK(fits, "masked_fill: mask " + mask.describe() + " does not broadcast to x " + x.describe());

  Tensor out = masked_fill_kernel(x, mask, value);
  if (autograd::needs_grad({x}))
    autograd::record(out, "masked_fill", {x}, [mask](const Tensor& g) {
      return std::vector<Tensor>{masked_fill_kernel(g, mask, 0.0)};
    });
  return out;
}

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  CMHA_CHECK(!xs.empty(), "concat: needs at least one tensor");
  const Tensor& first = xs[0];
  const int64_t d = first.wrap_dim(dim, "concat");
  Shape out_shape = first.shape();
  out_shape[d] = 0;
  std::vector<int64_t> sizes;
  std::vector<bool> wants_grad;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    x.check_cpu("concat");
    const std::string which = "concat: tensor " + std::to_string(i) + " is " + x.describe() + " but tensor 0 is " +
                              first.describe();
    CMHA_CHECK(x.dtype() == first.dtype(), which + "; all must share one dtype");
    bool same = x.dim() == first.dim();
    for (int64_t k = 0; same && k < x.dim(); ++k) same = k == d || x.shape()[k] == first.shape()[k];
    CMHA_CHECK(same, which + "; sizes must match except along dim " + std::to_string(d));
    sizes.push_back(x.shape()[d]);
    wants_grad.push_back(x.requires_grad());
    out_shape[d] += x.shape()[d];
  }

  Tensor out = Tensor::empty(out_shape, first.dtype());
  {
    autograd::NoGradGuard no_grad;
    int64_t at = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      out.slice(d, at, at + sizes[i]).copy_(xs[i]);
      at += sizes[i];
    }
  }
  if (autograd::needs_grad(xs))
    autograd::record(out, "concat", xs, [d, sizes, wants_grad](const Tensor& g) {
      // Each input's gradient is its slab of g (shapes: g[.., Σ n_i, ..] -> [.., n_i, ..]).
      std::vector<Tensor> grads(sizes.size());
      int64_t at = 0;
      for (size_t i = 0; i < sizes.size(); ++i) {
        if (wants_grad[i]) grads[i] = g.slice(d, at, at + sizes[i]).contiguous();
        at += sizes[i];
      }
      return grads;
    });
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  const int64_t d = x.wrap_dim(dim, "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    CMHA_CHECK(s >= 0, "split: negative size " + std::to_string(s) + " in " + shape_str(sizes));
    total += s;
  }
  CMHA_CHECK(total == x.shape()[d], "split: sizes " + shape_str(sizes) + " sum to " + std::to_string(total) +
                                        " but dim " + std::to_string(d) + " of " + x.describe() + " has size " +
                                        std::to_string(x.shape()[d]));
  // Views: each piece's backward is the slice backward (no copy forward).
  std::vector<Tensor> pieces;
  int64_t at = 0;
  for (int64_t s : sizes) {
    pieces.push_back(x.slice(d, at, at + s));
    at += s;
  }
  return pieces;
}

namespace {

// Lines along `dim` are the unit of work for gather and its backward: moving
// dim last in every operand turns each line into one row of for_each_row.
// A row of index reads (and, backward, writes) only the x line with the same
// other coordinates, so rows never collide: the scatter-add is race-free, and
// each row is summed serially in order, so it is deterministic too.
struct GatherGeometry {
  Tensor out_t, index_t, x_t;  // views with dim moved last
};

GatherGeometry dim_last(const Tensor& out, const Tensor& index, const Tensor& x, int64_t d) {
  return {make_view(out, out.shape(), out.strides(), out.offset()).transpose(d, -1),
          index.transpose(d, -1), make_view(x, x.shape(), x.strides(), x.offset()).transpose(d, -1)};
}

Tensor gather_backward(const Tensor& grad, const Tensor& index, const Shape& x_shape, DType x_dtype, int64_t d) {
  Tensor g = grad.to(DType::f32);
  Tensor grad_x = Tensor::zeros(x_shape);
  const GatherGeometry t = dim_last(g, index, grad_x, d);
  const Shape sg = t.out_t.strides(), si = t.index_t.strides(), sx = t.x_t.strides();
  const float* pg = static_cast<const float*>(g.raw_data());
  const int64_t* pi = index.data<int64_t>();
  float* px = grad_x.data<float>();
  cpu::for_each_row<3>(t.index_t.shape(), {&sg, &si, &sx},
                       [&](const std::array<int64_t, 3>& base, int64_t n, const std::array<int64_t, 3>& step) {
                         const float* gr = pg + base[0];
                         const int64_t* ir = pi + base[1];
                         float* xr = px + base[2];
                         for (int64_t i = 0; i < n; ++i) xr[ir[i * step[1]] * step[2]] += gr[i * step[0]];
                       });
  return grad_x.to(x_dtype);
}

}  // namespace

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  x.check_cpu("gather");
  index.check_cpu("gather");
  CMHA_CHECK(index.dtype() == DType::i32 || index.dtype() == DType::i64,
             "gather: index must be i32 or i64, got " + index.describe());
  const int64_t d = x.wrap_dim(dim, "gather");
  CMHA_CHECK(index.dim() == x.dim(),
             "gather: index " + index.describe() + " must have as many dims as x " + x.describe());
  for (int64_t k = 0; k < x.dim(); ++k)
    CMHA_CHECK(k == d || index.shape()[k] <= x.shape()[k],
               "gather: index " + index.describe() + " is larger than x " + x.describe() + " at dim " +
                   std::to_string(k) + "; only dim " + std::to_string(d) + " may be larger");

  // One i64 contiguous copy serves the range check, the kernel and backward.
  Tensor idx = index.to(DType::i64).contiguous();
  if (idx.same(index)) idx = index.clone();  // the caller may reuse its buffer before backward
  const int64_t* pi = idx.data<int64_t>();
  const int64_t n_dim = x.shape()[d];
  for (int64_t i = 0; i < idx.numel(); ++i)
    CMHA_CHECK(pi[i] >= 0 && pi[i] < n_dim,
               "gather: index value " + std::to_string(pi[i]) + " at position " + position_str(i, idx.shape()) +
                   " is out of range for dim " + std::to_string(d) + " of x " + x.describe() + " (size " +
                   std::to_string(n_dim) + ")");

  Tensor out = Tensor::empty(idx.shape(), x.dtype());  // [index shape]
  const GatherGeometry t = dim_last(out, idx, x, d);
  const Shape so = t.out_t.strides(), si = t.index_t.strides(), sx = t.x_t.strides();
  CMHA_DISPATCH(x.dtype(), {
    T* po = out.data<T>();
    const T* px = static_cast<const T*>(x.raw_data());
    cpu::for_each_row<3>(t.index_t.shape(), {&so, &si, &sx},
                         [&](const std::array<int64_t, 3>& base, int64_t n, const std::array<int64_t, 3>& step) {
                           T* o = po + base[0];
                           const int64_t* ir = pi + base[1];
                           const T* xr = px + base[2];
                           for (int64_t i = 0; i < n; ++i) o[i * step[0]] = xr[ir[i * step[1]] * step[2]];
                         });
  });

  if (autograd::needs_grad({x}))
    autograd::record(out, "gather", {x}, [idx, x_shape = x.shape(), x_dtype = x.dtype(), d](const Tensor& g) {
      return std::vector<Tensor>{gather_backward(g, idx, x_shape, x_dtype, d)};
    });
  return out;
}

}  // namespace cmha
