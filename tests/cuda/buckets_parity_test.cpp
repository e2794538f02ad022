// The gradient buckets' kernels on cuda:0 against the CPU: copies and one
// multiply per element, so every result is the CPU's bit for bit.
#include "backend/kernels.h"
#include "cuda/parity.h"

using namespace cmha;
using namespace cmha::test;

namespace {

// A bucket of `grads` one after another, then one flag per gradient (as
// train/gradient_buckets.cpp lays it out), filled with stale values first.
struct Layout {
  std::vector<int64_t> offsets;
  int64_t flags = 0, size = 0;
};
Layout layout_of(const std::vector<int64_t>& sizes) {
  Layout l;
  for (int64_t n : sizes) {
    l.offsets.push_back(l.size);
    l.size += n;
  }
  l.flags = l.size;
  l.size += static_cast<int64_t>(sizes.size());
  return l;
}

const std::vector<int64_t> kGradSizes = {1, 0, 7, 33, 1003, 65536 * 4 + 3};

}  // namespace

PARITY_TEST(BucketPackIsTheCpus, "buckets.pack") {
  const Layout l = layout_of(kGradSizes);
  const Tensor stale = random_of({l.size}, DType::f32, 1, 5.0, 6.0);
  Tensor cpu = stale.clone(), gpu_bucket = on_gpu(stale);
  for (size_t i = 0; i < kGradSizes.size(); ++i) {
    const int64_t n = kGradSizes[i], flag = l.flags + static_cast<int64_t>(i);
    // Gradients 2 and 4 are missing (zeros, flag 0); the empty one is present (flag 1, no elements).
    const bool missing = i == 2 || i == 4;
    const Tensor grad = missing ? Tensor() : random_of({n}, DType::f32, 10 + i);
    CMHA_KERNEL(Device::cpu(), buckets.pack)(grad, cpu, l.offsets[i], n, flag);
    CMHA_KERNEL(gpu(), buckets.pack)(grad.defined() ? on_gpu(grad) : Tensor(), gpu_bucket, l.offsets[i], n, flag);
  }
  EXPECT_TRUE(same_as_cpu(gpu_bucket, cpu));
  // A missing gradient of no elements still writes its flag.
  Tensor small_cpu = Tensor::full({3}, 7.0), small_gpu = on_gpu(small_cpu);
  CMHA_KERNEL(Device::cpu(), buckets.pack)(Tensor(), small_cpu, 1, 0, 2);
  CMHA_KERNEL(gpu(), buckets.pack)(Tensor(), small_gpu, 1, 0, 2);
  EXPECT_TRUE(same_as_cpu(small_gpu, small_cpu));
}

PARITY_TEST(BucketUnpackIsTheCpus, "buckets.unpack") {
  const Layout l = layout_of(kGradSizes);
  const Tensor bucket = random_of({l.size}, DType::f32, 2, -4.0, 4.0);
  const Tensor bucket_gpu = on_gpu(bucket);
  for (const float scale : {1.0f, 0.25f, 1.0f / 3.0f})
    for (size_t i = 0; i < kGradSizes.size(); ++i) {
      const int64_t n = kGradSizes[i];
      Tensor cpu = Tensor::empty({n}), gpu_grad = Tensor::empty({n}, DType::f32, gpu());
      CMHA_KERNEL(Device::cpu(), buckets.unpack)(bucket, l.offsets[i], cpu, scale);
      CMHA_KERNEL(gpu(), buckets.unpack)(bucket_gpu, l.offsets[i], gpu_grad, scale);
      EXPECT_TRUE(same_as_cpu(gpu_grad, cpu)) << "gradient " << i << ", scale " << scale;
    }
}

PARITY_TEST(BucketScaleIsTheCpus, "buckets.scale") {
  for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1003}, int64_t{65536 * 4 + 3}}) {
    const Tensor x = random_of({n}, DType::f32, 3, -10.0, 10.0);
    Tensor cpu = x.clone(), gpu_x = on_gpu(x);
    CMHA_KERNEL(Device::cpu(), buckets.scale)(cpu, 1.0f / 7.0f);
    CMHA_KERNEL(gpu(), buckets.scale)(gpu_x, 1.0f / 7.0f);
    EXPECT_TRUE(same_as_cpu(gpu_x, cpu)) << "n = " << n;
  }
}
