// The random fills of tensor/rng.h (uniform_, normal_, trunc_normal_): the
// caller's generator reserves the counters, the kernel of the tensor's device
// (backend/random.h) writes the values.
#include "backend/kernels.h"
#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace cmha {

namespace {

// The kernels write a contiguous f32 tensor: a strided view is filled through
// a contiguous scratch on its device, then copied into.
template <typename Kernel>
void fill(Tensor& t, Kernel kernel) {
  t.check_dtype(DType::f32, "random fill");
  Tensor dst = t.is_contiguous() ? t : Tensor::empty(t.shape(), DType::f32, t.device());
  kernel(dst);
  if (dst.same(t)) t.bump_version();  // else copy_ bumps it
  else t.copy_(dst);
}

}  // namespace

void uniform_(Tensor& t, Generator& gen, float low, float high) {
  const uint64_t base = gen.reserve(static_cast<uint64_t>(t.numel()));
  fill(t, [&](const Tensor& dst) { CMHA_KERNEL(dst.device(), random.uniform)(dst, gen.key(), base, low, high); });
}

void normal_(Tensor& t, Generator& gen, float mean, float std) {
  const uint64_t base = gen.reserve(static_cast<uint64_t>(t.numel()) * 2);
  fill(t, [&](const Tensor& dst) { CMHA_KERNEL(dst.device(), random.normal)(dst, gen.key(), base, mean, std); });
}

void trunc_normal_(Tensor& t, Generator& gen, float mean, float std, float a, float b) {
  const uint64_t base = gen.reserve(static_cast<uint64_t>(t.numel()) * 4 * kTruncNormalBlocks);
  fill(t, [&](const Tensor& dst) {
    CMHA_KERNEL(dst.device(), random.trunc_normal)(dst, gen.key(), base, mean, std, a, b);
  });
}

}  // namespace cmha
