#pragma once
// Kernel-table entries: elementwise (see backend/kernels.h). Each entry's comment says
// what it computes, the dtypes and layouts it accepts, and who allocates what.
#include <cstdint>

#include "tensor/tensor.h"

namespace cmha::backend {

// The arithmetic of `binary`.
enum class BinaryOp { add, sub, mul, div };

// The maps of `unary` (`s` is the entry's scalar argument; unused where absent).
enum class UnaryOp {
  add_scalar,       // x + s
  mul_scalar,       // x * s
  neg,              // -x
  exp,              // e^x
  log,              // ln x
  sqrt,             // √x
  pow_scalar,       // x^s
  tanh,             // tanh x
  pow_scalar_grad,  // s · x^(s-1), the derivative of x^s
  tanh_grad,        // 1 - t², the derivative of tanh given t = tanh x
};

struct ElementwiseKernels {
  // out = a <op> b with NumPy broadcasting. a, b f32, any strides (size-1 dims
  // broadcast); out f32, contiguous, of the broadcast shape, preallocated by the caller.
  void (*binary)(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) = nullptr;
  // out[i] = <op>(a[i], s). a, out f32, contiguous, of one shape; out preallocated by the caller.
  void (*unary)(UnaryOp op, const Tensor& a, const Tensor& out, float s) = nullptr;
};

}  // namespace cmha::backend
