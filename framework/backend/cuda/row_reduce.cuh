#pragma once
// Row kernels of the reductions (softmax, layer_norm, loss, reduce): a group
// of threads owns one row at a time and reduces along it, the rows walked
// grid-stride. A group is one warp (kThreads/32 rows per block) or the whole
// block. The entries choose the group from the row length alone
// (with_row_group), so the order of every addition — and the result — depends
// on the data and the shape only, never on the GPU.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/common.cuh"

namespace cmha::cuda {

// Rows up to this many elements go to a warp, longer ones to a block of kThreads.
constexpr int64_t kWarpRowMax = 1024;

// kGroup threads per row: 32 (a warp) or the block (blockDim.x == kGroup, a
// multiple of 32 up to 1024). Every thread of a group walks the same rows, so
// a block group's __syncthreads inside sum/max are reached by all.
template <int kGroup>
struct RowGroup {
  static_assert(kGroup % 32 == 0 && kGroup <= 1024, "a row group is a warp or a block");
  static constexpr bool kWarp = kGroup == 32;
  static constexpr int kSize = kGroup;

  // This thread's place in its group, 0 .. kGroup-1.
  __device__ static int lane() { return kWarp ? static_cast<int>(threadIdx.x % 32) : static_cast<int>(threadIdx.x); }
  // The first row of this thread's group, and the step to its next one.
  __device__ static int64_t first_row() {
    return kWarp ? static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32
                 : static_cast<int64_t>(blockIdx.x);
  }
  __device__ static int64_t row_step() {
    return kWarp ? static_cast<int64_t>(gridDim.x) * (blockDim.x / 32) : static_cast<int64_t>(gridDim.x);
  }
  // The sum (max) of v over the group, returned to every thread of it.
  // `scratch`: 32 values of shared memory (a warp needs none).
  template <typename T>
  __device__ static T sum(T v, T* scratch) {
    if constexpr (kWarp) return warp_sum(v);
    else return block_sum(v, scratch);
  }
  // NaN is dropped unless every value is NaN (fmax), as the CPU's `a > m ? a : m`.
  template <typename T>
  __device__ static T max(T v, T* scratch) {
    if constexpr (kWarp) return warp_max(v);
    else return block_max(v, scratch, static_cast<T>(-INFINITY));
  }
};

// for (each row r of this thread's group) — a grid-stride loop over rows.
#define CMHA_ROWS(r, rows, Group) for (int64_t r = Group::first_row(); r < (rows); r += Group::row_step())

// Launch geometry of a row kernel of group size kGroup over `rows` rows.
// kRowBlock<kGroup> is its block size, declared by the kernel with
// __launch_bounds__(kRowBlock<kGroup>) so ptxas budgets registers for it.
template <int kGroup>
constexpr int kRowBlock = kGroup == 32 ? kThreads : kGroup;
template <int kGroup>
inline unsigned row_threads() {
  return kRowBlock<kGroup>;
}
template <int kGroup>
inline unsigned row_blocks(int64_t rows) {
  const int64_t per_block = kGroup == 32 ? kThreads / 32 : 1;
  const int64_t b = (rows + per_block - 1) / per_block;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65536 ? 65536 : b));
}

// Calls f(std::integral_constant<int, G>{}) with the group size for rows of
// n elements: a warp up to kWarpRowMax, a block of kThreads beyond.
template <typename F>
inline void with_row_group(int64_t n, F&& f) {
  if (n <= kWarpRowMax) f(std::integral_constant<int, 32>{});
  else f(std::integral_constant<int, kThreads>{});
}

}  // namespace cmha::cuda
