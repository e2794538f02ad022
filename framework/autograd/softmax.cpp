// softmax and log_softmax along any dim, forward and backward: the checks,
// the [outer, n, inner] geometry and the autograd record; the loops are the
// softmax kernels (backend/softmax.h).
#include <string>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/kernels.h"

namespace cmha {

namespace {

using Geometry = backend::SoftmaxGeometry;

Geometry geometry(const Tensor& x, int64_t dim, const char* op) {
  Geometry g;
  if (x.dim() == 0) {  // a scalar is its own one-element row, as in PyTorch
    CMHA_CHECK(dim == 0 || dim == -1, std::string(op) + ": dim " + std::to_string(dim) +
                                          " is out of range for " + x.describe());
    return g;
  }
  const int64_t d = x.wrap_dim(dim, op);
  for (int64_t i = 0; i < d; ++i) g.outer *= x.shape()[i];
  g.n = x.shape()[d];
  for (int64_t i = d + 1; i < x.dim(); ++i) g.inner *= x.shape()[i];
  return g;
}

Tensor softmax_impl(const Tensor& x, int64_t dim, bool log, DType out_dtype) {
  const char* op = log ? "log_softmax" : "softmax";
  for (DType t : {x.dtype(), out_dtype})
    CMHA_CHECK(t == DType::f32 || t == DType::bf16,
               std::string(op) + ": expected f32 or bf16, got " + x.describe() + " -> " + dtype_name(out_dtype));
  const Device dev = common_device(op, {x});
  const Geometry s = geometry(x, dim, op);
  Tensor xc = x.is_contiguous() ? x : x.detach().contiguous();
  Tensor out = Tensor::empty(x.shape(), out_dtype, dev);
  CMHA_KERNEL(dev, softmax.forward)(xc, out, s, log);
  if (autograd::needs_grad({x}))
    autograd::record(out, op, {x}, [saved_y = autograd::SavedTensor(out.detach()), s, log, x_dtype = x.dtype()](const Tensor& g) {
      const char* op = log ? "log_softmax backward" : "softmax backward";
      const Tensor& y = saved_y.get(op);
      const Device gdev = common_device(op, {y, g});
      Tensor gc = g.is_contiguous() ? g : g.contiguous();
      Tensor dx = Tensor::empty(y.shape(), x_dtype, gdev);
      CMHA_KERNEL(gdev, softmax.backward)(y, gc, dx, s, log);
      return std::vector<Tensor>{dx};
    });
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, false, x.dtype()); }
Tensor softmax(const Tensor& x, int64_t dim, DType out_dtype) { return softmax_impl(x, dim, false, out_dtype); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, true, x.dtype()); }

}  // namespace cmha
