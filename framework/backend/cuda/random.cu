// CUDA kernels: random (entries of backend/random.h). Element i depends only
// on (key, first, i), as on the CPU (backend/cpu/random.cpp), through the
// shared Philox4x32-10 (tensor/philox.h).
//
// The arithmetic is the CPU build's, operation for operation. g++ contracts
// a·b + c into a fused multiply-add by default in C++ (-ffp-contract=fast;
// the build sets no -ffp-contract, and -march=native has FMA on x86-64
// machines from 2013 on), and the CPU objects fuse exactly where the
// __fmaf_rn calls below do; every other product and sum is __fmul_rn /
// __fadd_rn, which nvcc never fuses. So uniform is the CPU's bit for bit.
// normal and trunc_normal call CUDA's logf and cosf, which differ from
// glibc's by an ulp or two (sqrtf is correctly rounded on both), so they
// agree with the CPU to a few ulps, not bit for bit.
#include <cmath>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernel_table.h"
#include "tensor/philox.h"
#include "tensor/rng.h"

namespace cmha::cuda {
namespace {

constexpr float kTwoPi = 6.283185307179586f;  // the CPU's constant

// One Box–Muller value from two words: √(-2·log(1 - U1)) and cos(2π·U2)
// (1 - U1 is in (0, 1], so the log is finite; 1 - U1 is exact).
struct BoxMuller {
  float radius, cosine;
};
__device__ __forceinline__ BoxMuller box_muller(uint32_t w1, uint32_t w2) {
  const float u1 = __fadd_rn(1.0f, -philox_unit(w1));
  const float u2 = philox_unit(w2);
  return {__fsqrt_rn(__fmul_rn(-2.0f, logf(u1))), cosf(__fmul_rn(kTwoPi, u2))};
}

// Thread per counter c: elements 4c .. 4c + 3 take its words 0..3.
__global__ void uniform_kernel(float* out, int64_t n, uint64_t first, uint32_t k0, uint32_t k1, float low,
                               float high) {
  const float range = __fadd_rn(high, -low);
  CMHA_GRID_STRIDE(c, (n + 3) / 4) {
    const PhiloxWords r = philox_counter(first + static_cast<uint64_t>(c), k0, k1);
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int64_t i = 4 * c + l;
      if (i < n) out[i] = __fmaf_rn(range, philox_unit(r.w[l]), low);  // CPU: low + (high - low)·U, fused
    }
  }
}

// Thread per counter c: element 2c takes lanes (0, 1), element 2c + 1 lanes (2, 3).
__global__ void normal_kernel(float* out, int64_t n, uint64_t first, uint32_t k0, uint32_t k1, float mean,
                              float std) {
  CMHA_GRID_STRIDE(c, (n + 1) / 2) {
    const PhiloxWords r = philox_counter(first + static_cast<uint64_t>(c), k0, k1);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t i = 2 * c + half;
      if (i >= n) break;
      const BoxMuller z = box_muller(r.w[2 * half], r.w[2 * half + 1]);
      out[i] = __fmaf_rn(__fmul_rn(std, z.radius), z.cosine, mean);  // CPU: mean + (std·radius)·cosine, fused
    }
  }
}

// Thread per element: walks its own kTruncNormalBlocks counters, two draws
// each, and keeps the first value inside [a, b].
__global__ void trunc_normal_kernel(float* out, int64_t n, uint64_t first, uint32_t k0, uint32_t k1, float mean,
                                    float std, float a, float b) {
  CMHA_GRID_STRIDE(i, n) {
    float value = fminf(fmaxf(mean, a), b);  // the fallback when all 32 draws fall outside
    for (int k = 0; k < kTruncNormalBlocks; ++k) {
      const uint64_t counter = first + static_cast<uint64_t>(i) * kTruncNormalBlocks + static_cast<uint64_t>(k);
      const PhiloxWords r = philox_counter(counter, k0, k1);
      bool found = false;
#pragma unroll
      for (int lane = 0; lane < 4; lane += 2) {
        const BoxMuller z = box_muller(r.w[lane], r.w[lane + 1]);
        const float v = __fmaf_rn(std, __fmul_rn(z.radius, z.cosine), mean);  // CPU: mean + std·z, fused
        if (!found && v >= a && v <= b) {
          value = v;
          found = true;
        }
      }
      if (found) break;
    }
    out[i] = value;
  }
}

// out[t, i] = sin(p·ω_i), out[t, half + i] = cos(p·ω_i), in double (the
// CPU's formula; step = ln(10000)/(half - 1) is the host's value).
__global__ void sinusoidal_kernel(float* out, int64_t length, int64_t dim, int64_t first_position, double step) {
  const int64_t half = dim / 2;
  CMHA_GRID_STRIDE(e, length * half) {
    const int64_t t = e / half, i = e % half;
    const double angle = static_cast<double>(t + first_position) * exp(-static_cast<double>(i) * step);
    out[t * dim + i] = static_cast<float>(sin(angle));
    out[t * dim + half + i] = static_cast<float>(cos(angle));
  }
}

void uniform(const Tensor& out, std::array<uint32_t, 2> key, uint64_t first, float low, float high) {
  float* p = device_data<float>(out, "random.uniform");
  const int64_t n = out.numel();
  if (n == 0) return;
  uniform_kernel<<<blocks_for((n + 3) / 4), kThreads, 0, launch_stream(out)>>>(p, n, first, key[0], key[1], low,
                                                                              high);
  check_launch("uniform_kernel");
}

void normal(const Tensor& out, std::array<uint32_t, 2> key, uint64_t first, float mean, float std) {
  float* p = device_data<float>(out, "random.normal");
  const int64_t n = out.numel();
  if (n == 0) return;
  normal_kernel<<<blocks_for((n + 1) / 2), kThreads, 0, launch_stream(out)>>>(p, n, first, key[0], key[1], mean,
                                                                             std);
  check_launch("normal_kernel");
}

void trunc_normal(const Tensor& out, std::array<uint32_t, 2> key, uint64_t first, float mean, float std, float a,
                  float b) {
  float* p = device_data<float>(out, "random.trunc_normal");
  const int64_t n = out.numel();
  if (n == 0) return;
  trunc_normal_kernel<<<blocks_for(n), kThreads, 0, launch_stream(out)>>>(p, n, first, key[0], key[1], mean, std, a,
                                                                         b);
  check_launch("trunc_normal_kernel");
}

void sinusoidal_positions(const Tensor& out, int64_t first_position) {
  float* p = device_data<float>(out, "random.sinusoidal_positions");
  CMHA_CHECK(out.dim() == 2 && out.size(1) >= 4 && out.size(1) % 2 == 0,
             "random.sinusoidal_positions: out " + out.describe() + " must be [T, D] with D even and >= 4");
  const int64_t length = out.size(0), dim = out.size(1);
  if (length == 0) return;
  const double step = std::log(10000.0) / static_cast<double>(dim / 2 - 1);  // as the CPU computes it
  sinusoidal_kernel<<<blocks_for(length * (dim / 2)), kThreads, 0, launch_stream(out)>>>(p, length, dim,
                                                                                        first_position, step);
  check_launch("sinusoidal_kernel");
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

}  // namespace cmha::cuda
