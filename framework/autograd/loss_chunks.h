#pragma once
// How many rows of logits linear_cross_entropy computes at once.
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace cmha {

// Bytes of f32 logits per chunk. On the CPU (and the emulated GPU, which
// runs the CPU's kernels and must give its numbers) about 8 MB, to stay in
// cache. On a GPU a chunk is a GEMM launch: 1/64 of the device's memory, at
// most 512 MiB (4096 rows of a 32k vocabulary), so a step makes a handful of
// large GEMMs, not hundreds of 65-row ones.
inline size_t loss_chunk_bytes(bool real_gpu, size_t device_bytes) {
  if (!real_gpu) return size_t{8} << 20;
  return std::clamp<size_t>(device_bytes / 64, size_t{8} << 20, size_t{512} << 20);
}

// Rows per chunk for N rows of V logits: at least 16 rows.
inline int64_t loss_chunk_rows(int64_t N, int64_t V, size_t chunk_bytes) {
  const int64_t values = static_cast<int64_t>(chunk_bytes / sizeof(float));
  return std::clamp<int64_t>(values / std::max<int64_t>(V, 1), 16, std::max<int64_t>(N, 16));
}

}  // namespace cmha
