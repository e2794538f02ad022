// Embedding lookup: rows of a [V, D] table picked by integer ids (the
// embedding kernels, backend/embedding.h, gather and scatter-add the rows).
#include <string>
#include <vector>

#include "autograd/deferred_checks.h"
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/kernels.h"

namespace cmha {

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  weight.check_dtype(DType::f32, "embedding");
  const Device dev = common_device("embedding", {weight, ids});
  CMHA_CHECK(weight.dim() == 2, "embedding: weight must be [V, D], got " + weight.describe());
  CMHA_CHECK(ids.dtype() == DType::i32 || ids.dtype() == DType::i64,
             "embedding: ids must be i32 or i64, got " + ids.describe());
  const int64_t V = weight.shape()[0], D = weight.shape()[1];

  // One i64 contiguous copy serves the range check, the lookup and backward.
  Tensor id = ids.to(DType::i64).contiguous();
  if (id.same(ids)) id = ids.clone();  // the caller may reuse its ids buffer before backward
  // On a GPU inside the trainer's step, checked at its log cadence (autograd/deferred_checks.h):
  // the kernels give an id out of range a zero row until then.
  const Tensor found = Tensor::empty({2}, DType::i64, dev);  // {position, value} (backend/index.h)
  CMHA_KERNEL(dev, index.find_out_of_range)(id, V, found);
  autograd::check_now_or_deferred(found, [V, shape = ids.shape(), w = weight.describe()](const Tensor& answer) {
    const backend::OutOfRange bad = backend::out_of_range_of(answer.data<int64_t>("embedding check"));
    CMHA_CHECK(bad.position < 0, "embedding: id " + std::to_string(bad.value) + " at position " +
                                     position_str(bad.position, shape) + " is out of range for a vocabulary of " +
                                     std::to_string(V) + " (weight " + w + ")");
  });

  Tensor w = weight.detach().contiguous();
  Shape out_shape = ids.shape();  // [...] -> [..., D]
  out_shape.push_back(D);
  Tensor out = Tensor::empty(out_shape, DType::f32, dev);
  CMHA_KERNEL(dev, embedding.forward)(w, id, out);

  if (autograd::needs_grad({weight}))
    autograd::record(out, "embedding", {weight}, [id, V, D](const Tensor& grad) {
      // grad_w[V, D] = Σ over positions p with ids[p] == v of grad_out[p, :].
      Tensor g = grad.contiguous();  // [N, D] once flattened
      const Device gdev = common_device("embedding backward", {g, id});
      Tensor grad_w = Tensor::zeros({V, D}, DType::f32, gdev);
      CMHA_KERNEL(gdev, embedding.backward)(g, id, grad_w);
      return std::vector<Tensor>{grad_w};
    });
  return out;
}

}  // namespace cmha
