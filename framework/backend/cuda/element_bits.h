#pragma once
// The bytes of a host value stored as one element of a dtype, made by the CPU
// kernels' own conversion (backend/cpu/convert.h's store_from_double), so a
// CUDA fill or masked_fill writes the CPU's bits whatever the dtype: bf16/f16
// rounded through f32, b8 as value != 0, integers as x86 truncates.
#include <cstdint>
#include <cstring>

#include "backend/cpu/convert.h"
#include "backend/element_types.h"
#include "tensor/dtype.h"

namespace cmha::cuda {

// The element's bytes in the low bytes of the result (x86 and the GPU are
// little-endian): static_cast it to the unsigned type of the element's width.
inline uint64_t element_bits(DType dtype, double value) {
  uint64_t bits = 0;
  backend::with_any_element_type(dtype, "element_bits", [&](auto t) {
    using T = decltype(t);
    const T v = cpu::store_from_double<T>(value);
    std::memcpy(&bits, &v, sizeof(T));
  });
  return bits;
}

}  // namespace cmha::cuda
