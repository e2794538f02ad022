// dropout.forward and dropout.backward on cuda:0 against the CPU: the keep
// mask comes from one Philox counter layout (backend/dropout.h) on both, so
// the masks and the outputs (two f32 multiplies per element) are the CPU's
// bit for bit, for whole groups of 256, every tail length, a counter base
// whose low word wraps inside the call, and a key using both 32-bit halves.
#include <cmath>
#include <limits>

#include "autograd/ops.h"
#include "backend/kernels.h"
#include "cuda/parity.h"
#include "tensor/rng.h"

using namespace cmha;
using namespace cmha::test;

namespace {

constexpr std::array<uint32_t, 2> kDropoutKey{0x9E3779B9u, 0xC2B2AE35u};  // a 64-bit seed: both halves nonzero
constexpr uint64_t kBase = (uint64_t{1} << 32) - 1000;                      // c1 becomes 1 inside the larger calls

// The sizes: empty, tails of 1, 3 and 255, one whole group, a group and one,
// an uneven middle, and three parallel tasks' worth of groups plus a tail.
const int64_t kDropoutSizes[] = {0, 1, 3, 255, 256, 257, 1000, 65536 * 3 + 17};

struct DropoutResult {
  Tensor y, mask;
};

DropoutResult forward_on(Device device, const Tensor& x, uint64_t base, float p) {
  const Tensor xd = x.to(device);
  DropoutResult r{Tensor::empty(x.shape(), DType::f32, device), Tensor::empty(x.shape(), DType::b8, device)};
  CMHA_KERNEL(device, dropout.forward)(xd, r.y, r.mask, base, kDropoutKey, p, 1.0f / (1.0f - p));
  return r;
}

}  // namespace

PARITY_TEST(DropoutForwardMaskAndOutputAreTheCpus, "dropout.forward") {
  for (const float p : {0.1f, 0.5f, 0.9f})
    for (const int64_t n : kDropoutSizes) {
      const Tensor x = random_of({n}, DType::f32, 11 + static_cast<uint64_t>(n), -2.0, 2.0);
      const DropoutResult want = forward_on(Device::cpu(), x, kBase, p), got = forward_on(gpu(), x, kBase, p);
      EXPECT_TRUE(same_as_cpu(got.mask, want.mask)) << "n = " << n << ", p = " << p;
      EXPECT_TRUE(same_as_cpu(got.y, want.y)) << "n = " << n << ", p = " << p;
    }
}

PARITY_TEST(DropoutForwardBaseZeroAndHighCounters, "dropout.forward") {
  // The first counter of a stream, counters near the top of the 64-bit range,
  // and a call whose counters wrap past 2^64 - 1 (as uint64 arithmetic on both).
  for (const uint64_t base : {uint64_t{0}, ~uint64_t{0} - 100000, ~uint64_t{0} - 10}) {
    const Tensor x = random_of({65536 + 77}, DType::f32, 12);
    const DropoutResult want = forward_on(Device::cpu(), x, base, 0.3f), got = forward_on(gpu(), x, base, 0.3f);
    EXPECT_TRUE(same_as_cpu(got.mask, want.mask)) << "base " << base;
    EXPECT_TRUE(same_as_cpu(got.y, want.y)) << "base " << base;
  }
}

PARITY_TEST(DropoutForwardNonFiniteInputs, "dropout.forward") {
  // A dropped inf or NaN gives NaN, a kept one stays: the positions match the
  // CPU's. (NaN bits differ between x86 and CUDA, so close_to_cpu, which
  // requires NaN and ±inf exactly where the CPU has them.)
  Tensor x = random_of({1000}, DType::f32, 13);
  float* px = x.data<float>();
  for (int64_t i = 0; i < 1000; i += 37) px[i] = i % 2 ? std::numeric_limits<float>::infinity() : NAN;
  const DropoutResult want = forward_on(Device::cpu(), x, kBase, 0.5f), got = forward_on(gpu(), x, kBase, 0.5f);
  EXPECT_TRUE(same_as_cpu(got.mask, want.mask));
  EXPECT_TRUE(close_to_cpu(got.y, want.y, 0.0));
}

PARITY_TEST(DropoutForwardKeepRate, "dropout.forward") {
  // 2^22 draws: the kept fraction's standard deviation √(p(1-p)/n) is at most
  // 2.5e-4, so the bound 1.5e-3 (6σ) fails only for a biased mask (a wrong
  // threshold or comparison); a wrong counter layout keeps the rate and is
  // caught by the parity tests above.
  const int64_t n = int64_t{1} << 22;
  const Tensor x = Tensor::ones({n}).to(gpu());
  for (const float p : {0.1f, 0.5f, 0.9f}) {
    Tensor y = Tensor::empty({n}, DType::f32, gpu()), mask = Tensor::empty({n}, DType::b8, gpu());
    CMHA_KERNEL(gpu(), dropout.forward)(x, y, mask, 12345, kDropoutKey, p, 1.0f / (1.0f - p));
    const std::vector<float> m = on_cpu(mask).to_float_vector();
    double kept = 0.0;
    for (float v : m) kept += v;
    EXPECT_NEAR(kept / static_cast<double>(n), 1.0 - p, 1.5e-3) << "p = " << p;
  }
}

PARITY_TEST(DropoutBackwardIsTheCpus, "dropout.backward") {
  for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{33}, int64_t{1003}, int64_t{65536 * 3 + 17}}) {
    const Tensor x = random_of({n}, DType::f32, 21), g = random_of({n}, DType::f32, 22, -3.0, 3.0);
    const float p = 0.25f, scale = 1.0f / (1.0f - p);
    const DropoutResult want = forward_on(Device::cpu(), x, kBase, p);
    Tensor dx_cpu = Tensor::empty({n}), dx_gpu = Tensor::empty({n}, DType::f32, gpu());
    CMHA_KERNEL(Device::cpu(), dropout.backward)(g, want.mask, dx_cpu, scale);
    CMHA_KERNEL(gpu(), dropout.backward)(on_gpu(g), on_gpu(want.mask), dx_gpu, scale);
    EXPECT_TRUE(same_as_cpu(dx_gpu, dx_cpu)) << "n = " << n;
  }
}

PARITY_TEST(DropoutOpDrawsTheCpusMask, "dropout.forward") {
  // Through the op: the generator's reservation and key reach the GPU kernel
  // as they reach the CPU's (two calls, so the second starts at an offset).
  const Tensor x = random_of({300, 337}, DType::f32, 31);
  Generator cpu_gen(0x123456789ABCDEFull), gpu_gen(0x123456789ABCDEFull);
  for (int call = 0; call < 2; ++call) {
    const Tensor want = dropout(x, 0.2f, true, cpu_gen), got = dropout(on_gpu(x), 0.2f, true, gpu_gen);
    EXPECT_TRUE(same_as_cpu(got, want)) << "call " << call;
  }
  EXPECT_EQ(gpu_gen.offset(), cpu_gen.offset());
}
