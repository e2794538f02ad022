#pragma once
// Element conversions of the CPU kernels through double: the reference bits
// every device reproduces (backend/cuda/element_bits.h, copy.cu).
#include <type_traits>

#include "tensor/dtype.h"

namespace cmha::cpu {
// Loads and stores through float for the storage-only types.
template <typename T>
inline double load_as_double(const T& v) {
  if constexpr (std::is_same_v<T, ::cmha::bf16>) return bf16_to_float(v);
  else if constexpr (std::is_same_v<T, ::cmha::f16>) return f16_to_float(v);
  else return static_cast<double>(v);
}
template <typename T>
inline T store_from_double(double v) {
  if constexpr (std::is_same_v<T, ::cmha::bf16>) return float_to_bf16(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, ::cmha::f16>) return float_to_f16(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bool>) return v != 0.0;
  else return static_cast<T>(v);
}
// Element conversion between any two dtypes (exact when they are the same).
template <typename D, typename S>
inline D convert(const S& v) {
  if constexpr (std::is_same_v<D, S>) return v;
  else return store_from_double<D>(load_as_double(v));
}
}  // namespace cmha::cpu
