// Dropout with the keep mask drawn from the counter-based Philox generator,
// generated in parallel inside the forward pass by the dropout kernels
// (backend/dropout.h documents the counter layout every device reproduces).
// Element i depends only on (seed, base, i), never on the thread count.
#include <sstream>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/kernels.h"

namespace cmha {

namespace {

std::string format(float v) {
  std::ostringstream s;
  s << v;  // "0.3", "1.5", "nan": shorter than std::to_string's fixed six decimals
  return s.str();
}

}  // namespace

Tensor dropout(const Tensor& x, float p, bool training, Generator& gen) {
  CMHA_CHECK(p >= 0.0f && p <= 1.0f, "dropout: p must be in [0, 1], got " + format(p));
  x.check_dtype(DType::f32, "dropout");
  if (!training || p == 0.0f) return x;
  const Device dev = x.device();
  if (p == 1.0f) {
    Tensor out = Tensor::zeros(x.shape(), DType::f32, dev);
    if (autograd::needs_grad({x}))
      autograd::record(out, "dropout", {x}, [shape = x.shape(), dev](const Tensor&) {
        return std::vector<Tensor>{Tensor::zeros(shape, DType::f32, dev)};
      });
    return out;
  }

  Tensor xc = x.is_contiguous() ? x : x.detach().contiguous();
  const int64_t n = x.numel();
  const uint64_t base = gen.reserve(static_cast<uint64_t>(n));
  const float scale = 1.0f / (1.0f - p);
  Tensor out = Tensor::empty(x.shape(), DType::f32, dev);
  Tensor mask = Tensor::empty(x.shape(), DType::b8, dev);  // one byte per element
  CMHA_KERNEL(dev, dropout.forward)(xc, out, mask, base, gen.key(), p, scale);
  if (autograd::needs_grad({x}))
    autograd::record(out, "dropout", {x}, [mask, scale](const Tensor& g) {
      Tensor gc = g.is_contiguous() ? g : g.contiguous();
      const Device gdev = common_device("dropout backward", {gc, mask});
      Tensor dx = Tensor::empty(gc.shape(), DType::f32, gdev);
      CMHA_KERNEL(gdev, dropout.backward)(gc, mask, dx, scale);
      return std::vector<Tensor>{dx};
    });
  return out;
}

}  // namespace cmha
