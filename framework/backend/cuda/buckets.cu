// CUDA kernels: buckets (entries of backend/buckets.h): the gradient buckets'
// pack, unpack and scaling. Copies and single multiplies, so every result is
// the CPU's bit for bit.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernel_table.h"

namespace cmha::cuda {
namespace {

// dst[j] = src[j] (src null: 0) for j < n, and *flag = flag_value (written by
// one thread; the flag lies outside dst in every bucket layout).
__global__ void pack_kernel(const float* src, float* dst, int64_t n, float* flag, float flag_value) {
  CMHA_GRID_STRIDE(j, n) dst[j] = src != nullptr ? src[j] : 0.0f;
  if (blockIdx.x == 0 && threadIdx.x == 0) *flag = flag_value;
}

// dst[j] = src[j] · factor (dst may be src: x ← x · factor).
__global__ void scaled_copy_kernel(const float* src, float* dst, int64_t n, float factor) {
  CMHA_GRID_STRIDE(j, n) dst[j] = __fmul_rn(src[j], factor);
}

void check_range(const char* op, const Tensor& bucket, int64_t offset, int64_t numel) {
  CMHA_CHECK(offset >= 0 && numel >= 0 && offset + numel <= bucket.numel(),
             std::string(op) + ": elements [" + std::to_string(offset) + ", " + std::to_string(offset + numel) +
                 ") lie outside the bucket " + bucket.describe());
}

void pack(const Tensor& grad, const Tensor& bucket, int64_t offset, int64_t numel, int64_t flag) {
  float* data = device_data<float>(bucket, "bucket pack");
  const float* src = grad.defined() ? device_data<float>(grad, "bucket pack") : nullptr;
  const int64_t n = grad.defined() ? grad.numel() : numel;
  check_range("bucket pack", bucket, offset, n);
  check_range("bucket pack", bucket, flag, 1);
  CMHA_CHECK(!grad.defined() || grad.device() == bucket.device(),
             "bucket pack: gradient " + grad.describe() + " and bucket " + bucket.describe() + " on two devices");
  // One launch even for n = 0: the flag is written either way.
  pack_kernel<<<blocks_for(n), kThreads, 0, launch_stream(bucket)>>>(src, data + offset, n, data + flag,
                                                                     grad.defined() ? 1.0f : 0.0f);
  check_launch("pack_kernel");
}

void unpack(const Tensor& bucket, int64_t offset, const Tensor& grad, float scale) {
  const float* data = device_data<float>(bucket, "bucket unpack");
  float* dst = device_data<float>(grad, "bucket unpack");
  const int64_t n = grad.numel();
  check_range("bucket unpack", bucket, offset, n);
  CMHA_CHECK(grad.device() == bucket.device(),
             "bucket unpack: gradient " + grad.describe() + " and bucket " + bucket.describe() + " on two devices");
  if (n == 0) return;
  scaled_copy_kernel<<<blocks_for(n), kThreads, 0, launch_stream(bucket)>>>(data + offset, dst, n, scale);
  check_launch("scaled_copy_kernel");
}

void scale(const Tensor& x, float factor) {
  float* data = device_data<float>(x, "bucket scale");
  const int64_t n = x.numel();
  if (n == 0) return;
  scaled_copy_kernel<<<blocks_for(n), kThreads, 0, launch_stream(x)>>>(data, data, n, factor);
  check_launch("scaled_copy_kernel");
}

}  // namespace

backend::BucketsKernels buckets_kernels() {
  return {
      .pack = pack,
      .unpack = unpack,
      .scale = scale,
  };
}

}  // namespace cmha::cuda
