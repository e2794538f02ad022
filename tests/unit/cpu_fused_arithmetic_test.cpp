// The CPU's Adam, SGD, EMA and uniform kernels give the bits of
// support/fused_reference.h, the arithmetic the CUDA kernels reproduce, so the
// GPU parity tests can require the CPU's results bit for bit.
//
// Why this can change: cmha's CPU build sets no -ffp-contract, and g++'s
// default for C++ (-ffp-contract=fast) fuses a·b + c into one multiply-add
// wherever the target has FMA (-march=native on x86-64 from Haswell on);
// which products it fuses is the compiler's choice, seen in the objects and
// pinned here. A build without FMA (CMHA_NATIVE=OFF, an older CPU) or another
// compiler rounds differently: the test skips there, and the GPU parity
// tests fall back to a tolerance.
#include <gtest/gtest.h>

#include "backend/kernels.h"
#include "support/check.h"
#include "support/fused_reference.h"

using namespace cmha;
using namespace cmha::test;

namespace {

// g++ on x86-64 with FMA code generation, in the Release build (-O3): the
// build the reference was read from. The sanitized Debug build (-O1) fuses
// other products, and -O0 none.
constexpr bool kFusingBuild =
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__FMA__) && CMHA_RELEASE_BUILD
    true;
#else
    false;
#endif

// Odd sizes: the vectorised loops' bodies and their scalar tails.
const int64_t kSizes[] = {1, 7, 33, 1003};

}  // namespace

class CpuFusedArithmetic : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kFusingBuild)
      GTEST_SKIP() << "not g++'s Release build with FMA on x86-64: this CPU build rounds a·b + c its own way, and the GPU "
                      "parity tests of adam_step, sgd_step, ema_update and uniform compare with a tolerance";
  }
};

TEST_F(CpuFusedArithmetic, AdamStep) {
  for (const float l2 : {0.0f, 1e-2f})
    for (const float shrink : {1.0f, 0.9999f})
      for (const int64_t n : kSizes) {
        backend::AdamStep s;
        s.l2 = l2;
        s.shrink = shrink;
        s.bias2_sqrt = 0.0547f;
        s.neg_step_size = -3.7e-3f;
        const Tensor p = random_tensor({n}, 1), g = random_tensor({n}, 2);
        const Tensor m = random_tensor({n}, 3, -0.1f, 0.1f), v = random_tensor({n}, 4, 0.0f, 0.01f);
        const Tensor pr = p.clone(), mr = m.clone(), vr = v.clone();
        // Once without and once with the bf16 working copy: the same f32 bits either way.
        const Tensor p2 = p.clone(), m2 = m.clone(), v2 = v.clone(), copy = Tensor::empty({n}, DType::bf16);
        CMHA_KERNEL(Device::cpu(), optim.adam_step)(p, g, m, v, Tensor(), s, Tensor());
        CMHA_KERNEL(Device::cpu(), optim.adam_step)(p2, g, m2, v2, copy, s, Tensor());
        for (int64_t k = 0; k < n; ++k)
          fused::adam_element(pr.data<float>()[k], g.data<float>()[k], mr.data<float>()[k], vr.data<float>()[k], s);
        EXPECT_TRUE(fused::same_bits(p, pr) && fused::same_bits(m, mr) && fused::same_bits(v, vr))
            << "l2 " << l2 << ", shrink " << shrink << ", n = " << n;
        EXPECT_TRUE(fused::same_bits(p2, pr) && fused::same_bits(m2, mr) && fused::same_bits(v2, vr))
            << "with the bf16 copy: l2 " << l2 << ", shrink " << shrink << ", n = " << n;
        EXPECT_TRUE(fused::same_bits(copy, pr.to(DType::bf16))) << "the bf16 copy, n = " << n;
      }
}

TEST_F(CpuFusedArithmetic, SgdStep) {
  for (int config = 0; config < 16; ++config) {
    const bool decay = config & 1, momentum = config & 2, first = config & 4, nesterov = config & 8;
    if (!momentum && (first || nesterov)) continue;
    backend::SgdStep s;
    s.weight_decay = decay ? 1.23e-2f : 0.0f;
    s.momentum = momentum ? 0.913f : 0.0f;
    s.one_minus_dampening = 0.77f;
    s.neg_lr = -3.71e-2f;
    s.nesterov = nesterov;
    s.first = first;
    for (const int64_t n : kSizes) {
      const Tensor p = random_tensor({n}, 5), g = random_tensor({n}, 6), b = random_tensor({n}, 7);
      const Tensor pr = p.clone(), br = b.clone();
      CMHA_KERNEL(Device::cpu(), optim.sgd_step)(p, g, momentum ? b : Tensor(), s, Tensor());
      for (int64_t k = 0; k < n; ++k)
        fused::sgd_element(pr.data<float>()[k], g.data<float>()[k], momentum ? br.data<float>() + k : nullptr, s);
      EXPECT_TRUE(fused::same_bits(p, pr) && fused::same_bits(b, br)) << "config " << config << ", n = " << n;
    }
  }
}

TEST_F(CpuFusedArithmetic, EmaUpdate) {
  for (const int64_t n : kSizes) {
    const Tensor shadow = random_tensor({n}, 8), param = random_tensor({n}, 9), sr = shadow.clone();
    CMHA_KERNEL(Device::cpu(), optim.ema_update)(shadow, param, 0.9997f, static_cast<float>(1.0 - 0.9997), Tensor());
    for (int64_t k = 0; k < n; ++k)
      sr.data<float>()[k] =
          fused::ema_element(sr.data<float>()[k], param.data<float>()[k], 0.9997f, static_cast<float>(1.0 - 0.9997));
    EXPECT_TRUE(fused::same_bits(shadow, sr)) << "n = " << n;
  }
}

TEST_F(CpuFusedArithmetic, Uniform) {
  const std::array<uint32_t, 2> key{0x12345678u, 0x9ABCDEF0u};
  const uint64_t first = (uint64_t{1} << 32) - 7;
  for (const int64_t n : kSizes) {
    const Tensor out = Tensor::empty({n}), reference = Tensor::empty({n});
    CMHA_KERNEL(Device::cpu(), random.uniform)(out, key, first, -2.5f, 1.7f);  // a range of 4.2: (high - low)·U rounds
    for (int64_t i = 0; i < n; ++i) reference.data<float>()[i] = fused::uniform_element(i, key, first, -2.5f, 1.7f);
    EXPECT_TRUE(fused::same_bits(out, reference)) << "n = " << n;
  }
}
