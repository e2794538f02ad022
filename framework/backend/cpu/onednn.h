#pragma once
// The oneDNN side of the CPU backend: one engine and stream for the process,
// and matmul primitives cached by geometry and OpenMP thread count (creating
// a primitive costs far more than running a small one), in a bounded LRU.
#include "tensor/tensor.h"

namespace cmha::cpu {

// c = a @ b (+ bias broadcast over rows). a[..., M, K], b[..., K, N],
// c[..., M, N] preallocated; all have the same number of dims, batch dims
// equal or 1 (broadcast). Any of a, b may be a transposed view: strides are
// passed to oneDNN as they are. bias (optional) is [N], f32.
void matmul_into(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c);

// Number of matmul primitives created so far, and held now (at most 512:
// the least recently used go first; for tests of the cache).
size_t matmul_primitives_created();
size_t matmul_primitives_cached();

}  // namespace cmha::cpu
