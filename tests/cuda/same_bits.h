#pragma once
// Bit-for-bit comparison of f32 results that may hold NaN: the GPU's NaN
// payload and sign differ from x86's (0/0 is 0xffc00000 on x86, 0x7fffffff
// on the GPU), so NaN only has to sit where the CPU's does; every other
// element must have the CPU's bits, signed zeros and infinities included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tensor/tensor.h"

namespace cmha::test {

inline ::testing::AssertionResult same_bits_but_nan_payload(const Tensor& gpu_result, const Tensor& cpu_result) {
  if (gpu_result.shape() != cpu_result.shape() || gpu_result.dtype() != DType::f32 ||
      cpu_result.dtype() != DType::f32)
    return ::testing::AssertionFailure() << "GPU " << gpu_result.describe() << " vs CPU " << cpu_result.describe();
  const std::vector<float> a = gpu_result.to(Device::cpu()).to_float_vector();
  const std::vector<float> b = cpu_result.to_float_vector();
  for (size_t i = 0; i < a.size(); ++i) {
    uint32_t ua, ub;
    std::memcpy(&ua, &a[i], 4);
    std::memcpy(&ub, &b[i], 4);
    const bool ok = std::isnan(b[i]) ? std::isnan(a[i]) : ua == ub;
    if (!ok)
      return ::testing::AssertionFailure() << "element " << i << " of " << a.size() << ": GPU " << a[i] << " (0x"
                                           << std::hex << ua << "), CPU " << b[i] << " (0x" << ub << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace cmha::test
