#pragma once
#include <cstdint>
#include <bit>
#include <cstring>
#include <string>

namespace cmha {

// Element types. b8 is a byte-wide boolean used for masks.
enum class DType : uint8_t { f32, bf16, f16, i32, i64, b8 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "f32", "bf16", ...
bool is_floating(DType t);

// bfloat16 and IEEE half as storage types; arithmetic goes through float.
struct bf16 {
  uint16_t bits;
};
struct f16 {
  uint16_t bits;
};

inline float bf16_to_float(bf16 v) {
  uint32_t u = static_cast<uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Round to nearest even, NaN stays NaN (as PyTorch and oneDNN do).
inline bf16 float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>(u >> 16)};
}
inline float f16_to_float(f16 v) {
  return static_cast<float>(std::bit_cast<_Float16>(v.bits));
}
inline f16 float_to_f16(float f) {
  return f16{std::bit_cast<uint16_t>(static_cast<_Float16>(f))};
}

// Maps a C++ element type to its DType (used by Tensor::data<T>()).
template <typename T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<bf16>() { return DType::bf16; }
template <> constexpr DType dtype_of<f16>() { return DType::f16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<bool>() { return DType::b8; }

}  // namespace cmha
