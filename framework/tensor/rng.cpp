#include "tensor/rng.h"

#include <cmath>

#include "tensor/tensor.h"

namespace cmha {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
    uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kW0;
    k[1] += kW1;
  }
  return c;
}

namespace {

// Fills a contiguous f32 buffer element by element from value(i), in parallel,
// then copies into `t` when t is a strided view.
template <typename F>
void fill_by_index(Tensor& t, F value) {
  t.check_dtype(DType::f32, "random fill");
  t.check_cpu("random fill");
  Tensor dst = t.is_contiguous() ? t : Tensor::empty(t.shape());
  float* p = dst.data<float>();
  const int64_t n = dst.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = value(i);
  if (!dst.same(t)) t.copy_(dst);
}

constexpr float kTwoPi = 6.283185307179586f;

}  // namespace

void uniform_(Tensor& t, Generator& gen, float low, float high) {
  const uint64_t base = gen.reserve(static_cast<uint64_t>(t.numel()));
  const auto key = gen.key();
  fill_by_index(t, [&](int64_t i) {
    auto r = philox_block(base + static_cast<uint64_t>(i) / 4, key);
    return low + (high - low) * uint_to_unit(r[i % 4]);
  });
}

// Box–Muller on lanes (0,1) and (2,3) of each block: element i uses block i/2.
void normal_(Tensor& t, Generator& gen, float mean, float std) {
  const uint64_t base = gen.reserve(static_cast<uint64_t>(t.numel()) * 2);
  const auto key = gen.key();
  fill_by_index(t, [&](int64_t i) {
    auto r = philox_block(base + static_cast<uint64_t>(i) / 2, key);
    int lane = (i % 2) * 2;
    float u1 = 1.0f - uint_to_unit(r[lane]);  // (0, 1]: log is finite
    float u2 = uint_to_unit(r[lane + 1]);
    return mean + std * std::sqrt(-2.0f * std::log(u1)) * std::cos(kTwoPi * u2);
  });
}

// Each element owns 16 blocks of its own; resampling walks through them, so
// the result still depends only on (seed, offset, i).
void trunc_normal_(Tensor& t, Generator& gen, float mean, float std, float a, float b) {
  constexpr int kTries = 32;  // P(all 32 outside ±2σ) ≈ 1e-42
  const uint64_t base = gen.reserve(static_cast<uint64_t>(t.numel()) * 4 * (kTries / 2));
  const auto key = gen.key();
  fill_by_index(t, [&](int64_t i) {
    for (int k = 0; k < kTries / 2; ++k) {
      auto r = philox_block(base + static_cast<uint64_t>(i) * (kTries / 2) + k, key);
      for (int lane = 0; lane < 4; lane += 2) {
        float u1 = 1.0f - uint_to_unit(r[lane]);
        float u2 = uint_to_unit(r[lane + 1]);
        float z = std::sqrt(-2.0f * std::log(u1)) * std::cos(kTwoPi * u2);
        float v = mean + std * z;
        if (v >= a && v <= b) return v;
      }
    }
    return std::fmin(std::fmax(mean, a), b);
  });
}

}  // namespace cmha
