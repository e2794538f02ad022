#pragma once
// CMHA_DISPATCH(dtype, T, ...) runs the body with T bound to the C++ type of dtype.
#include <type_traits>

#include "tensor/dtype.h"

#define CMHA_DISPATCH_CASE(enumv, type, ...) \
  case ::cmha::DType::enumv: {               \
    using T = type;                          \
    __VA_ARGS__;                             \
    break;                                   \
  }

#define CMHA_DISPATCH(dtype, ...)                               \
  switch (dtype) {                                              \
    CMHA_DISPATCH_CASE(f32, float, __VA_ARGS__)                 \
    CMHA_DISPATCH_CASE(bf16, ::cmha::bf16, __VA_ARGS__)         \
    CMHA_DISPATCH_CASE(f16, ::cmha::f16, __VA_ARGS__)           \
    CMHA_DISPATCH_CASE(i32, int32_t, __VA_ARGS__)               \
    CMHA_DISPATCH_CASE(i64, int64_t, __VA_ARGS__)               \
    CMHA_DISPATCH_CASE(b8, bool, __VA_ARGS__)                   \
  }

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
