// CPU kernels: copies, fills and casts (entries of backend/copy.h).
#include <cmath>
#include <array>
#include <cstring>
#include <type_traits>

#include "backend/cpu/convert.h"
#include "backend/cpu/element.h"
#include "backend/cpu/kernel_table.h"
#include "backend/cpu/strided.h"
#include "backend/element_types.h"

namespace cmha::cpu {

namespace {

// f32 and bf16, which convert through float (ld/st) exactly as convert<> does
// through double: the bf16 rounding of a float is the same either way.
template <typename T>
constexpr bool kFloatElement = std::is_same_v<T, float> || std::is_same_v<T, ::cmha::bf16>;

// n elements from s (every step[1]) to d (every step[0]), converted.
template <typename D, typename S>
void copy_row(D* d, const S* s, int64_t n, const std::array<int64_t, 2>& step) {
  if (step[0] == 1 && step[1] == 1) {
    if constexpr (std::is_same_v<D, S>) {
      std::memcpy(d, s, static_cast<size_t>(n) * sizeof(S));
    } else if constexpr (kFloatElement<D> && kFloatElement<S>) {
      // f32 <-> bf16 through float, vectorised: the casts of bf16 training.
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) st(d[i], ld(s[i]));
    } else {
      for (int64_t i = 0; i < n; ++i) d[i] = convert<D>(s[i]);
    }
  } else if constexpr (kFloatElement<D> && kFloatElement<S>) {
    for (int64_t i = 0; i < n; ++i) st(d[i * step[0]], ld(s[i * step[1]]));
  } else {
    for (int64_t i = 0; i < n; ++i) d[i * step[0]] = convert<D>(s[i * step[1]]);
  }
}

void copy(const Tensor& dst, const Tensor& src) {
  const Shape src_strides = broadcast_strides(src, dst.shape());
  const Shape& dst_strides = dst.strides();
  char* dst_base = static_cast<char*>(dst.raw_data());
  const char* src_base = static_cast<const char*>(src.raw_data());
  const DType dst_type = dst.dtype(), src_type = src.dtype();
  backend::with_any_element_type(dst_type, "copy", [&](auto dst_element) {
    using D = decltype(dst_element);
    D* d = reinterpret_cast<D*>(dst_base);
    backend::with_any_element_type(src_type, "copy", [&](auto src_element) {
      using T = decltype(src_element);
      const T* s = reinterpret_cast<const T*>(src_base);
      for_each_row<2>(dst.shape(), {&dst_strides, &src_strides},
                      [&](const std::array<int64_t, 2>& base, int64_t n, const std::array<int64_t, 2>& step) {
                        copy_row(d + base[0], s + base[1], n, step);
                      });
    });
  });
}

void fill(const Tensor& dst, double value) {
  // All-zero bits are 0 in every dtype: one memset for a contiguous zero fill.
  if (value == 0.0 && !std::signbit(value) && dst.is_contiguous()) {
    std::memset(dst.raw_data(), 0, dst.nbytes());
    return;
  }
  const Shape& st = dst.strides();
  char* base = static_cast<char*>(dst.raw_data());
  backend::with_any_element_type(dst.dtype(), "fill", [&](auto element) {
    using T = decltype(element);
    T* p = reinterpret_cast<T*>(base);
    const T v = store_from_double<T>(value);
    for_each_row<1>(dst.shape(), {&st},
                    [&](const std::array<int64_t, 1>& b, int64_t n, const std::array<int64_t, 1>& step) {
                      for (int64_t i = 0; i < n; ++i) p[b[0] + i * step[0]] = v;
                    });
  });
}

void iota(const Tensor& dst) {
  const int64_t n = dst.numel();
  backend::with_any_element_type(dst.dtype(), "iota", [&](auto element) {
    using T = decltype(element);
    T* p = static_cast<T*>(dst.raw_data());
    for (int64_t i = 0; i < n; ++i) p[i] = store_from_double<T>(static_cast<double>(i));
  });
}

}  // namespace

backend::CopyKernels copy_kernels() { return {.copy = copy, .fill = fill, .iota = iota, .transfer = nullptr}; }

}  // namespace cmha::cpu
