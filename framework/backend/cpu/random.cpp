// CPU kernels: random (entries of backend/random.h).
#include <cmath>

#include "backend/cpu/kernel_table.h"
#include "tensor/rng.h"

namespace cmha::cpu {

namespace {

// Writes value(i) into every element of a contiguous f32 tensor, in parallel.
template <typename F>
void fill_by_index(const Tensor& t, const char* op, F value) {
  float* p = t.data<float>(op);
  const int64_t n = t.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = value(i);
}

constexpr float kTwoPi = 6.283185307179586f;

void uniform(const Tensor& out, std::array<uint32_t, 2> key, uint64_t base, float low, float high) {
  fill_by_index(out, "random.uniform", [&](int64_t i) {
    auto r = philox_block(base + static_cast<uint64_t>(i) / 4, key);
    return low + (high - low) * uint_to_unit(r[i % 4]);
  });
}

// Box–Muller on lanes (0,1) and (2,3) of each block: element i uses block i/2.
void normal(const Tensor& out, std::array<uint32_t, 2> key, uint64_t base, float mean, float std) {
  fill_by_index(out, "random.normal", [&](int64_t i) {
    auto r = philox_block(base + static_cast<uint64_t>(i) / 2, key);
    int lane = (i % 2) * 2;
    float u1 = 1.0f - uint_to_unit(r[lane]);  // (0, 1]: log is finite
    float u2 = uint_to_unit(r[lane + 1]);
    return mean + std * std::sqrt(-2.0f * std::log(u1)) * std::cos(kTwoPi * u2);
  });
}

// Each element owns kTruncNormalBlocks blocks of its own; resampling walks
// through them, so the result still depends only on (seed, offset, i).
void trunc_normal(const Tensor& out, std::array<uint32_t, 2> key, uint64_t base, float mean, float std, float a,
                  float b) {
  fill_by_index(out, "random.trunc_normal", [&](int64_t i) {
    for (int k = 0; k < kTruncNormalBlocks; ++k) {
      auto r = philox_block(base + static_cast<uint64_t>(i) * kTruncNormalBlocks + k, key);
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

void sinusoidal_positions(const Tensor& out, int64_t first_position) {
  const int64_t length = out.size(0), dim = out.size(1);
  float* p = out.data<float>("random.sinusoidal_positions");
  const int64_t half = dim / 2;
  // fairseq: frequency_i = exp(-i · ln(10000) / (half - 1))
  const double step = std::log(10000.0) / static_cast<double>(half - 1);
  for (int64_t t = 0; t < length; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(t + first_position) * std::exp(-static_cast<double>(i) * step);
      p[t * dim + i] = static_cast<float>(std::sin(angle));
      p[t * dim + half + i] = static_cast<float>(std::cos(angle));
    }
}

}  // namespace

backend::RandomKernels random_kernels() {
  backend::RandomKernels k;
  k.uniform = uniform;
  k.normal = normal;
  k.trunc_normal = trunc_normal;
  k.sinusoidal_positions = sinusoidal_positions;
  return k;
}

}  // namespace cmha::cpu
