// Tensor's methods that compute without recording autograd history: the
// factories that fill, copies, fills and moves between devices. Each runs the
// kernel of the tensor's device (backend/copy.h).
#include <string>

#include "backend/kernels.h"
#include "tensor/tensor.h"

namespace cmha {

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }

Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

Tensor Tensor::arange(int64_t n, DType dtype) {
  Tensor t = empty({n}, dtype);
  CMHA_KERNEL(t.device(), copy.iota)(t);
  return t;
}

void Tensor::copy_(const Tensor& src) {
  // Across devices (a checkpoint's CPU tensors into GPU parameters, say) the
  // source travels first, as PyTorch's copy_ does.
  if (src.defined() && defined() && src.device() != device() && (src.device().is_cpu() || device().is_cpu())) {
    copy_(src.to(device()));
    return;
  }
  const Device dev = common_device("copy_", {*this, src});
  const Shape out_shape = broadcast_shapes(shape(), src.shape(), "copy_");
  CMHA_CHECK(out_shape == shape(), "copy_: source " + src.describe() + " does not broadcast to " + describe());
  CMHA_KERNEL(dev, copy.copy)(*this, src);
  bump_version();
}

void Tensor::fill_(double value) {
  CMHA_KERNEL(device(), copy.fill)(*this, value);
  bump_version();
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  CMHA_CHECK(device().is_cpu() || target.is_cpu(), "to(" + target.str() + "): " + describe() +
                                                        " goes through the host: copy it to the CPU first");
  // A contiguous copy on this device first: transfer moves plain bytes.
  Tensor src = is_contiguous() ? *this : Tensor::empty(shape(), dtype(), device());
  if (!src.same(*this)) src.copy_(*this);
  Tensor out = Tensor::empty(shape(), dtype(), target);
  CMHA_KERNEL(target.is_cpu() ? device() : target, copy.transfer)(out, src);
  return out;
}

Tensor Tensor::pinned() const {
  CMHA_CHECK(device().is_cpu(), "pinned(): " + describe() + " is not on the CPU");
  Tensor out = Tensor::empty_pinned(shape(), dtype());
  out.copy_(*this);
  return out;
}

bool Tensor::is_pinned() const { return impl().storage && impl().storage->pinned(); }

void Tensor::move_to_(Device target) {
  if (target == device() && is_contiguous()) return;
  const Tensor moved = contiguous().to(target);
  TensorImpl& me = impl();
  me.storage = moved.impl().storage;
  me.shape = moved.shape();
  me.strides = moved.strides();
  me.offset = moved.offset();
  if (me.grad) me.grad = Tensor(me.grad).to(target).impl_ptr();
}

}  // namespace cmha
