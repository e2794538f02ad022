#pragma once
// The one dtype dispatch of every device: a host entry calls
// with_element_type (any dtype a kernel takes) or with_float_type(s) (f32 and
// bf16, which the float kernels compute in f32: the bf16 activations of
// train.bf16 beside the f32 residual stream) to launch a loop or kernel
// templated on each tensor's C++ element type; the device's own ld()/st()
// (backend/cpu/element.h, backend/cuda/common.cuh) read and write them.
#include <string>

#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

namespace cmha::backend {

// Calls f(T{}) with T the C++ element type of dtype d, one of Ts; any other
// dtype is an error naming the kernel and `expected` ("an f32 or bf16 tensor").
template <typename... Ts, typename F>
void with_element_type(DType d, const char* kernel, const char* expected, F&& f) {
  const bool found = ((d == dtype_of<Ts>() ? (f(Ts{}), true) : false) || ...);
  if (!found) throw Error(std::string(kernel) + ": expected " + expected + ", got " + dtype_name(d));
}

// Every dtype a tensor can have.
template <typename F>
void with_any_element_type(DType d, const char* kernel, F&& f) {
  with_element_type<float, bf16, f16, int32_t, int64_t, bool, uint8_t>(d, kernel, "a tensor of a known dtype", f);
}

// f32 or bf16.
template <typename F>
void with_float_type(DType d, const char* kernel, F&& f) {
  with_element_type<float, bf16>(d, kernel, "an f32 or bf16 tensor", f);
}

// The element types of two and three tensors, each f32 or bf16 on its own.
template <typename F>
void with_float_types(const Tensor& a, const Tensor& b, const char* kernel, F&& f) {
  with_float_type(a.dtype(), kernel, [&](auto ta) { with_float_type(b.dtype(), kernel, [&](auto tb) { f(ta, tb); }); });
}
template <typename F>
void with_float_types(const Tensor& a, const Tensor& b, const Tensor& c, const char* kernel, F&& f) {
  with_float_types(a, b, kernel, [&](auto ta, auto tb) {
    with_float_type(c.dtype(), kernel, [&](auto tc) { f(ta, tb, tc); });
  });
}

}  // namespace cmha::backend
