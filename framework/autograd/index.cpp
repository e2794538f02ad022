// Indexing ops: masked_fill, concat, split, gather (their kernels: backend/index.h;
// concat and split are slices and copies).
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/kernels.h"

namespace cmha {

Tensor masked_fill(const Tensor& x, const Tensor& mask, float value) {
  const Device dev = common_device("masked_fill", {x, mask});
  CMHA_CHECK(mask.dtype() == DType::b8, "masked_fill: mask must be b8 (bool), got " + mask.describe());
  // Only the mask broadcasts: the result keeps x's shape.
  bool fits = mask.dim() <= x.dim();
  for (int64_t i = 1; fits && i <= mask.dim(); ++i) {
    const int64_t m = mask.shape()[mask.dim() - i], n = x.shape()[x.dim() - i];
    fits = m == n || m == 1;
  }
  CMHA_CHECK(fits, "masked_fill: mask " + mask.describe() + " does not broadcast to x " + x.describe());

  Tensor out = Tensor::empty(x.shape(), x.dtype(), dev);
  CMHA_KERNEL(dev, index.masked_fill)(x, mask, out, value);
  if (autograd::needs_grad({x}))
    autograd::record(out, "masked_fill", {x}, [saved_mask = autograd::SavedTensor(mask.detach())](const Tensor& g) {
      const Tensor& mask = saved_mask.get("masked_fill backward");
      const Device gdev = common_device("masked_fill backward", {g, mask});
      Tensor dx = Tensor::empty(g.shape(), g.dtype(), gdev);
      CMHA_KERNEL(gdev, index.masked_fill)(g, mask, dx, 0.0);
      return std::vector<Tensor>{dx};
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
    common_device("concat", {first, x});
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

  Tensor out = Tensor::empty(out_shape, first.dtype(), first.device());
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

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  const Device dev = common_device("gather", {x, index});
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
  const int64_t n_dim = x.shape()[d];
  const Tensor found = Tensor::empty({2}, DType::i64, dev);  // {position, value}, read at once
  CMHA_KERNEL(dev, index.find_out_of_range)(idx, n_dim, found);
  const backend::OutOfRange bad = backend::out_of_range_of(found.to(Device::cpu()).data<int64_t>("gather check"));
  CMHA_CHECK(bad.position < 0,
             "gather: index value " + std::to_string(bad.value) + " at position " +
                 position_str(bad.position, idx.shape()) + " is out of range for dim " + std::to_string(d) +
                 " of x " + x.describe() + " (size " + std::to_string(n_dim) + ")");

  Tensor out = Tensor::empty(idx.shape(), x.dtype(), dev);  // [index shape]
  CMHA_KERNEL(dev, index.gather)(x, idx, out, d);

  if (autograd::needs_grad({x}))
    autograd::record(out, "gather", {x}, [idx, x_shape = x.shape(), x_dtype = x.dtype(), d](const Tensor& g) {
      // grad_x[.., idx[p], ..] += g[p] along d, in f32, then back to x's dtype.
      Tensor g32 = g.to(DType::f32);
      const Device gdev = common_device("gather backward", {g32, idx});
      Tensor grad_x = Tensor::zeros(x_shape, DType::f32, gdev);
      CMHA_KERNEL(gdev, index.gather_backward)(g32, idx, grad_x, d);
      return std::vector<Tensor>{grad_x.to(x_dtype)};
    });
  return out;
}

}  // namespace cmha
