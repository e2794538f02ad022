// CPU kernels: copies, fills and casts (entries of backend/copy.h).
#include <cmath>
#include <cstring>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/kernel_table.h"
#include "backend/cpu/strided.h"

namespace cmha::cpu {

namespace {

void copy(const Tensor& dst, const Tensor& src) {
  const Shape src_strides = broadcast_strides(src, dst.shape());
  const Shape& dst_strides = dst.strides();
  char* dst_base = static_cast<char*>(dst.raw_data());
  const char* src_base = static_cast<const char*>(src.raw_data());
  const DType dt = dst.dtype(), st = src.dtype();
  CMHA_DISPATCH(dt, {
    using D = T;
    D* d = reinterpret_cast<D*>(dst_base);
    CMHA_DISPATCH(st, {
      const T* s = reinterpret_cast<const T*>(src_base);
      for_each_row<2>(dst.shape(), {&dst_strides, &src_strides},
                      [&](const std::array<int64_t, 2>& base, int64_t n, const std::array<int64_t, 2>& step) {
                        D* dp = d + base[0];
                        const T* sp = s + base[1];
                        for (int64_t i = 0; i < n; ++i) dp[i * step[0]] = convert<D>(sp[i * step[1]]);
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
  CMHA_DISPATCH(dst.dtype(), {
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
  CMHA_DISPATCH(dst.dtype(), {
    T* p = static_cast<T*>(dst.raw_data());
    for (int64_t i = 0; i < n; ++i) p[i] = store_from_double<T>(static_cast<double>(i));
  });
}

}  // namespace

backend::CopyKernels copy_kernels() { return {.copy = copy, .fill = fill, .iota = iota, .transfer = nullptr}; }

}  // namespace cmha::cpu
