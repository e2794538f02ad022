// Dropout with the keep mask drawn from the counter-based Philox generator,
// generated in parallel inside the forward pass by the dropout kernels
// (backend/dropout.h documents the counter layout every device reproduces).
// Element i depends only on (seed, base, i), never on the thread count.
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/kernels.h"

namespace cmha {

Tensor dropout(const Tensor& x, float p, bool training, Generator& gen) {
  CMHA_CHECK(p >= 0.0f && p <= 1.0f, "dropout: p must be in [0, 1], got " + number_str(p));
  CMHA_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::bf16,
             "dropout: expected f32 or bf16, got " + x.describe());  // the result and gradient keep it
  if (!training || p == 0.0f) return x;
  const Device dev = x.device();
  if (p == 1.0f) {
    Tensor out = Tensor::zeros(x.shape(), x.dtype(), dev);
    if (autograd::needs_grad({x}))
      autograd::record(out, "dropout", {x}, [shape = x.shape(), dtype = x.dtype(), dev](const Tensor&) {
        return std::vector<Tensor>{Tensor::zeros(shape, dtype, dev)};
      });
    return out;
  }

  Tensor xc = x.is_contiguous() ? x : x.detach().contiguous();
  const int64_t n = x.numel();
  const uint64_t base = gen.reserve(static_cast<uint64_t>(n));
  const float scale = 1.0f / (1.0f - p);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), dev);
  Tensor mask = Tensor::empty(x.shape(), DType::b8, dev);  // one byte per element
  CMHA_KERNEL(dev, dropout.forward)(xc, out, mask, base, gen.key(), p, scale);
  if (autograd::needs_grad({x}))
    autograd::record(out, "dropout", {x}, [mask, scale, dtype = x.dtype()](const Tensor& g) {
      Tensor gc = g.is_contiguous() ? g : g.contiguous();
      const Device gdev = common_device("dropout backward", {gc, mask});
      Tensor dx = Tensor::empty(gc.shape(), dtype, gdev);
      CMHA_KERNEL(gdev, dropout.backward)(gc, mask, dx, scale);
      return std::vector<Tensor>{dx};
    });
  return out;
}

}  // namespace cmha
