// CPU kernels: dropout (entries of backend/dropout.h), the keep mask drawn
// from the counter-based Philox generator in parallel inside the forward pass.
//
// The counter layout (backend/dropout.h) lets 64 counters run through the
// Philox rounds side by side (the compiler vectorises the 32x32->64
// multiplies, and 64 independent lanes hide their latency), and each of the
// four output words then covers 64 consecutive elements.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "backend/cpu/element.h"
#include "backend/cpu/kernel_table.h"
#include "backend/cpu/parallel.h"
#include "tensor/rng.h"

namespace cmha::cpu {

namespace {

constexpr int kCounters = 64;              // Philox counters run side by side
constexpr int64_t kGroup = 4 * kCounters;  // elements per group of counters
constexpr int64_t kTask = 4 * kGroup;      // elements per parallel task

// Philox4x32-10 of counters first .. first + kCounters - 1; word l of counter
// j lands in out[l][j]. The same rounds as philox4x32_10 (tensor/philox.h), 64 lanes at once.
[[gnu::always_inline]] inline void philox_lanes(uint64_t first, std::array<uint32_t, 2> key,
                                                uint32_t (&out)[4][kCounters]) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t(&c0)[kCounters] = out[0];
  uint32_t(&c1)[kCounters] = out[1];
  uint32_t(&c2)[kCounters] = out[2];
  uint32_t(&c3)[kCounters] = out[3];
  for (int j = 0; j < kCounters; ++j) {
    const uint64_t c = first + static_cast<uint64_t>(j);
    c0[j] = static_cast<uint32_t>(c);
    c1[j] = static_cast<uint32_t>(c >> 32);
    c2[j] = 0;
    c3[j] = 0;
  }
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
#pragma omp simd
    for (int j = 0; j < kCounters; ++j) {
      const uint64_t p0 = static_cast<uint64_t>(kM0) * c0[j];
      const uint64_t p1 = static_cast<uint64_t>(kM1) * c2[j];
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[j] ^ k0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[j] ^ k1;
      c1[j] = static_cast<uint32_t>(p1);
      c3[j] = static_cast<uint32_t>(p0);
      c0[j] = n0;
      c2[j] = n2;
    }
    k0 += kW0;
    k1 += kW1;
  }
}

// out[i] = in[i] · mask[i] · scale over [begin, end). Multiplying (rather than
// selecting) gives NaN for a dropped inf/NaN, as PyTorch does; it also
// vectorises, where a loop reading `bool` does not with g++.
template <typename I, typename O>
void apply_mask(const I* in, const uint8_t* mask, O* out, int64_t begin, int64_t end, float scale) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) st(out[i], ld(in[i]) * (static_cast<float>(mask[i]) * scale));
}

// Fills mask (0/1 per element) from the counter layout, then y = x·mask·scale.
// Each task first writes its kTask mask bytes, then streams x into y: kept
// apart, the Philox arithmetic and the memory stream each run at full speed,
// where one fused loop ran at half.
template <typename X, typename Y>
void forward_kernel(const X* x, Y* y, uint8_t* mask, int64_t n, uint64_t base,
                    std::array<uint32_t, 2> key, uint32_t threshold, float scale) {
  const int64_t groups = n / kGroup, whole = groups * kGroup;
  const int64_t tasks = (whole + kTask - 1) / kTask;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t begin = task * kTask, end = std::min(whole, begin + kTask);
    for (int64_t at = begin; at < end; at += kGroup) {
      uint32_t r[4][kCounters];
      philox_lanes(base + static_cast<uint64_t>(at / 4), key, r);
      for (int l = 0; l < 4; ++l) {
        uint8_t* m = mask + at + l * kCounters;
#pragma omp simd
        for (int j = 0; j < kCounters; ++j) m[j] = (r[l][j] >> 8) >= threshold;
      }
    }
    apply_mask(x, mask, y, begin, end, scale);
  }
  const uint64_t tail_base = base + static_cast<uint64_t>(whole / 4);
  for (int64_t t = 0; whole + t < n; ++t) {
    const auto r = philox_block(tail_base + static_cast<uint64_t>(t) / 4, key);
    mask[whole + t] = (r[t % 4] >> 8) >= threshold;
  }
  apply_mask(x, mask, y, whole, n, scale);
}

void forward(const Tensor& x, const Tensor& y, const Tensor& mask, uint64_t base, std::array<uint32_t, 2> key,
             float p, float scale) {
  with_float_types(x, y, "dropout", [&](auto tx, auto ty) {
    forward_kernel(x.data<decltype(tx)>("dropout"), y.data<decltype(ty)>("dropout"),
                   reinterpret_cast<uint8_t*>(mask.data<bool>("dropout")), x.numel(), base, key,
                   backend::dropout_keep_threshold(p), scale);
  });
}

void backward(const Tensor& g, const Tensor& mask, const Tensor& dx, float scale) {
  const int64_t n = dx.numel(), tasks = (n + kTask - 1) / kTask;
  const uint8_t* pm = reinterpret_cast<const uint8_t*>(mask.data<bool>("dropout backward"));
  with_float_types(g, dx, "dropout backward", [&](auto tg, auto td) {
    const auto* pg = g.data<decltype(tg)>("dropout backward");
    auto* pd = dx.data<decltype(td)>("dropout backward");
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
    for (int64_t task = 0; task < tasks; ++task)
      apply_mask(pg, pm, pd, task * kTask, std::min(n, (task + 1) * kTask), scale);
  });
}

}  // namespace

backend::DropoutKernels dropout_kernels() {
  backend::DropoutKernels k;
  k.forward = forward;
  k.backward = backward;
  return k;
}

}  // namespace cmha::cpu
