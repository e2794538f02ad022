#pragma once
// The floating element types the float kernels of every device compute in
// f32: f32 and bf16 (the bf16 activations of train.bf16 beside the f32
// residual stream). A host entry calls with_float_types to launch a loop or
// kernel templated on each tensor's element type; the device's own ld()/st()
// (backend/cpu/element.h, backend/cuda/common.cuh) read and write them.
#include <string>

#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

namespace cmha::backend {

// Calls f(T{}) with T the element type of dtype d (float or bf16); any other
// dtype is an error naming the kernel.
template <typename F>
void with_float_type(DType d, const char* kernel, F&& f) {
  if (d == DType::f32) f(float{});
  else if (d == DType::bf16) f(bf16{});
  else throw Error(std::string(kernel) + ": expected an f32 or bf16 tensor, got " + dtype_name(d));
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
