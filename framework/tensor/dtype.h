#pragma once
#include <cstdint>
#include <bit>
#include <cstring>
#include <string>

namespace cmha {

// Element types. b8 is a byte-wide boolean used for masks; u8 holds the
// pixels of image batches as the loader delivers them (data/image_loader.h).
enum class DType : uint8_t { f32, bf16, f16, i32, i64, b8, u8 };

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
// GCC has _Float16 on every x86-64; clang before 15 only with AVX512-FP16,
// but its storage type __fp16 converts the same way (F16C instructions; the
// fuzzing build, tests/fuzz, uses clang 14).
#if defined(__FLT16_MANT_DIG__)
using ieee_half = _Float16;
#else
using ieee_half = __fp16;
#endif
inline float f16_to_float(f16 v) {
  ieee_half h;
  std::memcpy(&h, &v.bits, 2);  // not bit_cast: clang cannot return an __fp16
  return static_cast<float>(h);
}
inline f16 float_to_f16(float f) {
  const ieee_half h = static_cast<ieee_half>(f);
  f16 out;
  std::memcpy(&out.bits, &h, 2);
  return out;
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
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }

}  // namespace cmha
