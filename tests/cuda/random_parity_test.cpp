// The random fills and the sinusoidal table on cuda:0 against the CPU, for
// counters whose low word wraps inside the call and a key using both halves.
//
// uniform is one subtraction and one fused multiply-add on both devices: the
// same bits (checked against the host's evaluation of the kernel's
// arithmetic too). normal and trunc_normal go through logf and cosf, which
// CUDA and glibc round differently by an ulp or two: per element
// |Δ| ≲ 4·2⁻²⁴·|std·z|, so the normalised error Σ(a-b)²/Σb² stays below
// 1e-13 and 1e-11 leaves room while any wrong counter or lane gives ~1.
// sinusoidal_positions rounds a double to f32 on both devices; CUDA's sin,
// cos and exp differ from glibc's by an ulp of the double, which changes the
// f32 only at a rounding boundary (one f32 ulp, ~1e-15 normalised): 1e-13.
#include <cmath>

#include "backend/kernels.h"
#include "cuda/parity.h"
#include "support/fused_reference.h"
#include "tensor/rng.h"

using namespace cmha;
using namespace cmha::test;

namespace {

constexpr std::array<uint32_t, 2> kFillKey{0x85EBCA6Bu, 0x27D4EB2Fu};
constexpr uint64_t kFirst = (uint64_t{1} << 32) - 3;

const int64_t kFillSizes[] = {0, 1, 3, 7, 33, 1003, 65536 * 4 + 5};

// `fill` writes into an f32 tensor of n elements on `device`.
template <typename Fill>
Tensor filled(Device device, int64_t n, Fill fill) {
  Tensor out = Tensor::empty({n}, DType::f32, device);
  fill(device, out);
  return out;
}

}  // namespace

PARITY_TEST(RandomUniformIsTheCpus, "random.uniform") {
  for (const int64_t n : kFillSizes) {
    // A range of 4.2, so that (high - low)·U rounds and fusing it matters.
    const auto fill = [](Device d, const Tensor& out) {
      CMHA_KERNEL(d, random.uniform)(out, kFillKey, kFirst, -2.5f, 1.7f);
    };
    const Tensor want = filled(Device::cpu(), n, fill), got = filled(gpu(), n, fill);
    Tensor reference = Tensor::empty({n});
    for (int64_t i = 0; i < n; ++i) reference.data<float>()[i] = fused::uniform_element(i, kFillKey, kFirst, -2.5f, 1.7f);
    if (cuda_emulated()) {  // the "GPU" runs the CPU's kernel
      EXPECT_TRUE(same_as_cpu(got, want)) << "n = " << n << " (emulated device)";
      continue;
    }
    EXPECT_TRUE(same_as_cpu(got, reference)) << "n = " << n << ": the GPU against the kernel's arithmetic";
    // The CPU's bits where its build fuses as g++ -march=native does
    // (tests/unit/cpu_fused_arithmetic_test.cpp), else within an ulp.
    if (fused::same_bits(want, reference))
      EXPECT_TRUE(same_as_cpu(got, want)) << "n = " << n;
    else
      EXPECT_TRUE(close_to_cpu(got, want, 1e-13)) << "n = " << n << " (this CPU build does not fuse as g++ does)";
  }
}

PARITY_TEST(RandomNormalMatchesTheCpu, "random.normal") {
  for (const int64_t n : kFillSizes) {
    const auto fill = [](Device d, const Tensor& out) { CMHA_KERNEL(d, random.normal)(out, kFillKey, kFirst, 0.5f, 2.0f); };
    EXPECT_TRUE(close_to_cpu(filled(gpu(), n, fill), filled(Device::cpu(), n, fill), 1e-11))
        << "n = " << n;
  }
}

PARITY_TEST(RandomTruncNormalMatchesTheCpu, "random.trunc_normal") {
  // [a, b] = [-1, 3] around mean 0.5 (most first draws accepted), and
  // [3.5, 4] for a standard normal (most elements exhaust their 32 draws and
  // take the fallback, clamp(mean) = 3.5).
  struct Case {
    float mean, std, a, b;
  };
  for (const Case c : {Case{0.5f, 2.0f, -1.0f, 3.0f}, Case{0.0f, 1.0f, 3.5f, 4.0f}})
    for (const int64_t n : kFillSizes) {
      const auto fill = [c](Device d, const Tensor& out) {
        CMHA_KERNEL(d, random.trunc_normal)(out, kFillKey, kFirst, c.mean, c.std, c.a, c.b);
      };
      const std::vector<float> g = filled(gpu(), n, fill).to(Device::cpu()).to_float_vector();
      const std::vector<float> w = filled(Device::cpu(), n, fill).to_float_vector();
      // Elementwise: a few ulps apart, except where the devices' last-ulp
      // difference moved a draw across a bound (then one accepted a draw the
      // other rejected, and the values differ; one of them lies within 1e-5
      // of the bound). Such a flip has probability ~1e-7 per draw.
      int64_t flips = 0;
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_TRUE(g[i] >= c.a && g[i] <= c.b) << "element " << i << " = " << g[i];
        if (std::fabs(g[i] - w[i]) <= 1e-6f * (1.0f + std::fabs(w[i]))) continue;
        const auto near_bound = [&](float v) { return std::fabs(v - c.a) < 1e-5f || std::fabs(v - c.b) < 1e-5f; };
        EXPECT_TRUE(near_bound(g[i]) || near_bound(w[i])) << "element " << i << ": GPU " << g[i] << ", CPU " << w[i];
        ++flips;
      }
      EXPECT_LE(flips, 2) << "n = " << n;
    }
}

PARITY_TEST(RandomSinusoidalPositionsMatchTheCpu, "random.sinusoidal_positions") {
  struct Case {
    int64_t length, dim, first_position;
  };
  for (const Case c : {Case{0, 8, 2}, Case{1, 4, 0}, Case{7, 10, 2}, Case{33, 512, 1}, Case{1003, 6, 1024}}) {
    const Tensor want = Tensor::empty({c.length, c.dim}), got = Tensor::empty({c.length, c.dim}, DType::f32, gpu());
    CMHA_KERNEL(Device::cpu(), random.sinusoidal_positions)(want, c.first_position);
    CMHA_KERNEL(gpu(), random.sinusoidal_positions)(got, c.first_position);
    EXPECT_TRUE(close_to_cpu(got, want, 1e-13)) << c.length << " x " << c.dim << " from " << c.first_position;
  }
}
