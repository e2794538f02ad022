#pragma once
// Walking tensors of arbitrary strides, row by row: the innermost dimension is
// a plain loop (vectorisable when its strides are 1), the outer rows are
// split across OpenMP threads.
#include <array>
#include <cstdint>
#include <vector>

#include "backend/cpu/parallel.h"
#include "tensor/tensor.h"

namespace cmha::cpu {

// Calls row(base, n, step) for every innermost row of `shape`, where base[k]
// and step[k] are the element offset and innermost stride of operand k.
template <size_t K, typename RowFn>
void for_each_row(const Shape& shape, const std::array<const Shape*, K>& strides, RowFn row) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  if (shape_numel(shape) == 0) return;
  if (nd == 0) {
    std::array<int64_t, K> base{}, step{};
    row(base, int64_t{1}, step);
    return;
  }
  const int64_t inner = shape[nd - 1];
  const int64_t rows = shape_numel(shape) / inner;
  std::array<int64_t, K> step;
  for (size_t k = 0; k < K; ++k) step[k] = (*strides[k])[nd - 1];
  // Parallel only when there is enough work to pay for the threads.
  const bool parallel = rows > 1 && rows * inner >= kParallelMin;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < rows; ++r) {
    std::array<int64_t, K> base{};
    int64_t rem = r;
    for (int64_t d = nd - 2; d >= 0; --d) {
      const int64_t idx = rem % shape[d];
      rem /= shape[d];
      for (size_t k = 0; k < K; ++k) base[k] += idx * (*strides[k])[d];
    }
    row(base, inner, step);
  }
}

// Broadcasting geometry is the tensor layer's (tensor/tensor.h).
using ::cmha::broadcast_shapes;
using ::cmha::broadcast_strides;

}  // namespace cmha::cpu
