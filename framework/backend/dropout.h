#pragma once
// Kernel-table entries: dropout (see backend/kernels.h). Each entry's comment says
// what it computes, the dtypes and layouts it accepts, and who allocates what.
//
// The keep mask comes from the counter-based Philox4x32-10 generator
// (philox_block in tensor/rng.h), and every device must draw exactly the same
// mask for a (key, base, n): the CPU and CUDA kernels are checked bit for bit.
//
// Counter layout. The op reserves ceil(n/4) counters from `base`
// (Generator::reserve(n)). With counter c = (c0 = low 32 bits, c1 = high 32
// bits, c2 = 0, c3 = 0) and word l in 0..3 of philox_block(c, key):
// - Elements go in groups of 256: element i = 256·q + 64·l + j (q = i / 256,
//   l = (i % 256) / 64, j = i % 64) takes word l of counter base + 64·q + j,
//   for every i < 256·(n / 256).
// - The last n % 256 elements, i = 256·(n / 256) + t (t = 0, 1, ...), take
//   word t % 4 of counter base + 64·(n / 256) + t / 4 (still inside the
//   reservation).
// Element i is kept when (word >> 8) >= ceil(p · 2^24) (computed in double),
// i.e. when its 24-bit uniform u = (word >> 8) / 2^24 satisfies u >= p.
// The mask therefore depends only on (key, base, i), never on the thread
// count or the device. (The grouping lets the CPU run 64 counters through the
// rounds side by side; a GPU thread per counter j of a group writes 4 elements
// 64 apart.)
#include <array>
#include <cmath>
#include <cstdint>

#include "tensor/tensor.h"

namespace cmha::backend {

// The keep threshold of drop probability p: an element is kept when
// (word >> 8) >= ceil(p · 2^24), so P(keep) = 1 - p to within 2^-24. Computed
// in double on the host and handed to every device's kernel, so no device
// rounds p differently.
inline uint32_t dropout_keep_threshold(float p) {
  return static_cast<uint32_t>(std::ceil(static_cast<double>(p) * 16777216.0));
}

struct DropoutKernels {
  // mask[i] = keep(i) (0 or 1, the layout above) and y[i] = x[i] · mask[i] · scale
  // (a multiply, not a select: a dropped inf/NaN gives NaN, as in PyTorch).
  // x, y: contiguous, n elements, f32 or bf16 each (f32 arithmetic); mask: contiguous b8 of n elements; all
  // preallocated by the caller. 0 < p < 1 (the op handles p = 0 and p = 1);
  // scale is 1 / (1 - p) as the op computes it.
  void (*forward)(const Tensor& x, const Tensor& y, const Tensor& mask, uint64_t base,
                  std::array<uint32_t, 2> key, float p, float scale) = nullptr;
  // dx[i] = g[i] · mask[i] · scale. g, dx: contiguous, of one size, f32 or bf16 each, dx
  // preallocated; mask: the b8 mask forward wrote.
  void (*backward)(const Tensor& g, const Tensor& mask, const Tensor& dx, float scale) = nullptr;
};

}  // namespace cmha::backend
