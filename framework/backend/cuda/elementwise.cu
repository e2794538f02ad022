// CUDA kernels: elementwise (entries of backend/elementwise.h). Each op is
// its own instantiation of the kernels below: the op enum is switched on once
// per call, never per element. add/sub/mul/div, the scalar add and multiply,
// negation and sqrt are IEEE operations (nvcc's default -prec-div and
// -prec-sqrt), so they give the CPU's bits; exp, log, pow and tanh are
// libdevice's, within a few ulp of glibc's.
#include <array>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernel_table.h"
#include "backend/cuda/map.cuh"

namespace cmha::cuda {

namespace {

using backend::BinaryOp;
using backend::UnaryOp;

// ---- binary ---------------------------------------------------------------------

struct Add {
  __device__ float operator()(float x, float y) const { return x + y; }
};
struct Sub {
  __device__ float operator()(float x, float y) const { return x - y; }
};
struct Mul {
  __device__ float operator()(float x, float y) const { return x * y; }
};
struct Div {
  __device__ float operator()(float x, float y) const { return x / y; }
};

// out (contiguous, the broadcast shape) = f(a, b); geometry operand 0: a,
// operand 1: b, each with stride 0 where it broadcasts.
template <typename A, typename B, typename O, typename F>
__global__ void binary_strided_kernel(const A* a, const B* b, O* out, StridedGeometry<2> g, int64_t n, F f) {
  CMHA_GRID_STRIDE(i, n) {
    int64_t at[2];
    g.offsets(i, at);
    st(out[i], f(ld(a[at[0]]), ld(b[at[1]])));
  }
}

template <typename F>
void binary_as(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const Shape& shape = out.shape();
  const StridedGeometry<2> g =
      strided_geometry<2>(shape, {broadcast_strides(a, shape), broadcast_strides(b, shape)}, "elementwise.binary");
  if (g.dims == 0 || (g.dims == 1 && g.strides[0][0] == 1 && g.strides[1][0] == 1)) {
    map2(a, b, out, f, "elementwise.binary");  // both contiguous, of out's shape
    return;
  }
  with_float_types(a, b, out, "elementwise.binary", [&](auto ta, auto tb, auto to) {
    using A = decltype(ta);
    using B = decltype(tb);
    using O = decltype(to);
    binary_strided_kernel<A, B, O, F><<<blocks_for(n), kThreads, 0, launch_stream(out)>>>(
        static_cast<const A*>(a.raw_data()), static_cast<const B*>(b.raw_data()), static_cast<O*>(out.raw_data()), g,
        n, f);
  });
  check_launch("elementwise.binary");
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  switch (op) {
    case BinaryOp::add: return binary_as(a, b, out, Add{});
    case BinaryOp::sub: return binary_as(a, b, out, Sub{});
    case BinaryOp::mul: return binary_as(a, b, out, Mul{});
    case BinaryOp::div: return binary_as(a, b, out, Div{});
  }
}

// ---- unary ----------------------------------------------------------------------

struct AddScalar {
  float s;
  __device__ float operator()(float x) const { return x + s; }
};
struct MulScalar {
  float s;
  __device__ float operator()(float x) const { return x * s; }
};
struct Neg {
  __device__ float operator()(float x) const { return -x; }
};
struct Exp {
  __device__ float operator()(float x) const { return expf(x); }
};
struct Log {
  __device__ float operator()(float x) const { return logf(x); }
};
struct Sqrt {
  __device__ float operator()(float x) const { return sqrtf(x); }
};
struct PowScalar {
  float e;
  __device__ float operator()(float x) const { return powf(x, e); }
};
struct Tanh {
  __device__ float operator()(float x) const { return tanhf(x); }
};
// s · x^(s-1)
struct PowScalarGrad {
  float e;
  __device__ float operator()(float x) const { return e * powf(x, e - 1.0f); }
};
// 1 - t², given t = tanh x
struct TanhGrad {
  __device__ float operator()(float t) const { return 1.0f - t * t; }
};

void unary(UnaryOp op, const Tensor& a, const Tensor& out, float s) {
  const char* k = "elementwise.unary";
  switch (op) {
    case UnaryOp::add_scalar: return map1(a, out, AddScalar{s}, k);
    case UnaryOp::mul_scalar: return map1(a, out, MulScalar{s}, k);
    case UnaryOp::neg: return map1(a, out, Neg{}, k);
    case UnaryOp::exp: return map1(a, out, Exp{}, k);
    case UnaryOp::log: return map1(a, out, Log{}, k);
    case UnaryOp::sqrt: return map1(a, out, Sqrt{}, k);
    case UnaryOp::pow_scalar: return map1(a, out, PowScalar{s}, k);
    case UnaryOp::tanh: return map1(a, out, Tanh{}, k);
    case UnaryOp::pow_scalar_grad: return map1(a, out, PowScalarGrad{s}, k);
    case UnaryOp::tanh_grad: return map1(a, out, TanhGrad{}, k);
  }
}

}  // namespace

backend::ElementwiseKernels elementwise_kernels() {
  backend::ElementwiseKernels k;
  k.binary = binary;
  k.unary = unary;
  return k;
}

}  // namespace cmha::cuda
