// CPU kernels: buckets (entries of backend/buckets.h): the gradient buckets'
// pack, unpack and scaling.
#include <algorithm>

#include "backend/cpu/kernel_table.h"
#include "backend/cpu/parallel.h"

namespace cmha::cpu {
namespace {

void pack(const Tensor& grad, const Tensor& bucket, int64_t offset, int64_t numel, int64_t flag) {
  float* data = bucket.data<float>("bucket pack");
  float* dst = data + offset;
  if (grad.defined()) {
    const float* src = grad.data<float>("bucket pack");
    std::copy(src, src + grad.numel(), dst);
    data[flag] = 1.0f;
  } else {
    std::fill(dst, dst + numel, 0.0f);
    data[flag] = 0.0f;
  }
}

void unpack(const Tensor& bucket, int64_t offset, const Tensor& grad, float scale) {
  const float* src = bucket.data<float>("bucket unpack") + offset;
  float* pg = grad.data<float>("bucket unpack");
  const int64_t n = grad.numel();
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t j = 0; j < n; ++j) pg[j] = src[j] * scale;
}

void scale(const Tensor& x, float factor) {
  float* pg = x.data<float>("bucket scale");
  const int64_t n = x.numel();
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t j = 0; j < n; ++j) pg[j] *= factor;
}

}  // namespace

backend::BucketsKernels buckets_kernels() {
  return {
      .pack = pack,
      .unpack = unpack,
      .scale = scale,
  };
}

}  // namespace cmha::cpu
