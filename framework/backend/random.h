#pragma once
// Kernel-table entries: random (see backend/kernels.h). Each entry's comment says
// what it computes, the dtypes and layouts it accepts, and who allocates what.
//
// The counter-based fills behind tensor/rng.h and the initialisers of nn/init.h,
// plus the fixed position table of nn/positional.h. Every fill writes element i
// from (key, first, i) alone, so the result does not depend on the thread count
// or the device: `key` is Generator::key(), `first` the counter that
// Generator::reserve() returned for this draw (the caller reserves).
#include <array>
#include <cstdint>

#include "tensor/tensor.h"

namespace cmha::backend {

struct RandomKernels {
  // out[i] = low + (high - low) · U, U = uint_to_unit(lane i % 4 of philox_block(first + i / 4)).
  // out: contiguous f32, preallocated; reserve numel values.
  void (*uniform)(const Tensor& out, std::array<uint32_t, 2> key, uint64_t first, float low, float high) = nullptr;
  // out[i] = mean + std · Box–Muller(lanes (0, 1) or (2, 3) of philox_block(first + i / 2)), in f32.
  // out: contiguous f32, preallocated; reserve 2 · numel values.
  void (*normal)(const Tensor& out, std::array<uint32_t, 2> key, uint64_t first, float mean, float std) = nullptr;
  // As normal, resampled until inside [a, b]: element i walks the kTruncNormalBlocks
  // blocks first + i · kTruncNormalBlocks + k (two draws each) and falls back to
  // mean clamped into [a, b]. out: contiguous f32, preallocated; reserve
  // 4 · kTruncNormalBlocks · numel values.
  void (*trunc_normal)(const Tensor& out, std::array<uint32_t, 2> key, uint64_t first, float mean, float std,
                       float a, float b) = nullptr;
  // fairseq's sinusoidal positions (not random; a fixed table): out [T, D],
  // out[t, i] = sin(p·ω_i), out[t, D/2 + i] = cos(p·ω_i) for p = first_position + t,
  // ω_i = exp(-i · ln(10000) / (D/2 - 1)), computed in double. out: contiguous
  // f32 [T, D], D even and >= 4, preallocated.
  void (*sinusoidal_positions)(const Tensor& out, int64_t first_position) = nullptr;
};

}  // namespace cmha::backend
