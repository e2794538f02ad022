// Element-wise arithmetic with NumPy broadcasting, forward and backward.
#include <string>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/kernels.h"

namespace cmha {

namespace {

using backend::BinaryOp;
using backend::UnaryOp;

void check_float(const Tensor& t, const char* op) {
  CMHA_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::bf16,
             std::string(op) + ": expected f32 or bf16, got " + t.describe());
}

// out = a <op> b over the broadcast shape of a and b, each f32 or bf16; the
// result is bf16 only when both are (f32 otherwise: the f32 residual stream
// plus a bf16 sublayer output stays f32).
Tensor binary_op(const Tensor& a, const Tensor& b, const char* op, BinaryOp kind) {
  check_float(a, op);
  check_float(b, op);
  const Device dev = common_device(op, {a, b});
  const Shape out_shape = broadcast_shapes(a.shape(), b.shape(), op);
  const DType dtype = a.dtype() == DType::bf16 && b.dtype() == DType::bf16 ? DType::bf16 : DType::f32;
  Tensor out = Tensor::empty(out_shape, dtype, dev);
  CMHA_KERNEL(dev, elementwise.binary)(kind, a, b, out);
  return out;
}

// out[i] = <op>(a[i], s) in a's dtype (f32 or bf16); a may be strided.
Tensor unary_op(const Tensor& a, const char* op, UnaryOp kind, float s = 0.0f) {
  check_float(a, op);
  const Device dev = common_device(op, {a});
  Tensor ac = a.is_contiguous() ? a : a.detach().contiguous();
  Tensor out = Tensor::empty(a.shape(), a.dtype(), dev);
  CMHA_KERNEL(dev, elementwise.unary)(kind, ac, out, s);
  return out;
}

// The gradient of an operand of `shape` and `dtype` from g: summed over the
// dims broadcast to reach g's shape (in f32), in the operand's dtype.
Tensor grad_to(const Tensor& g, const Shape& shape, DType dtype) {
  if (g.shape() == shape) return g.to(dtype);
  return sum_to(g.to(DType::f32), shape).to(dtype);
}

}  // namespace

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  CMHA_CHECK(lead >= 0, "sum_to: cannot reduce " + x.describe() + " to the larger shape " + shape_str(shape));
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i < lead || (shape[i - lead] == 1 && x.shape()[i] != 1)) dims.push_back(i);
  Tensor r = dims.empty() ? x : sum(x, dims, /*keepdim=*/true);
  return r.reshape(shape);
}

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_op(a, b, "add", BinaryOp::add);
  if (autograd::needs_grad({a, b})) {
    Shape sa = a.shape(), sb = b.shape();
    autograd::record(out, "add", {a, b}, [sa, sb, da = a.dtype(), db = b.dtype()](const Tensor& g) {
      return std::vector<Tensor>{grad_to(g, sa, da), grad_to(g, sb, db)};
    });
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_op(a, b, "sub", BinaryOp::sub);
  if (autograd::needs_grad({a, b})) {
    Shape sa = a.shape(), sb = b.shape();
    autograd::record(out, "sub", {a, b}, [sa, sb, da = a.dtype(), db = b.dtype()](const Tensor& g) {
      return std::vector<Tensor>{grad_to(g, sa, da), grad_to(neg(g), sb, db)};
    });
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_op(a, b, "mul", BinaryOp::mul);
  if (autograd::needs_grad({a, b})) {
    // Each side's gradient needs only the other side's value.
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    autograd::SavedTensor saved_a(gb ? a.detach() : Tensor()), saved_b(ga ? b.detach() : Tensor());
    autograd::record(out, "mul", {a, b}, [saved_a, saved_b, sa = a.shape(), sb = b.shape(), da = a.dtype(),
                                          db = b.dtype(), ga, gb](const Tensor& g) {
      return std::vector<Tensor>{ga ? grad_to(mul(g, saved_b.get("mul backward")), sa, da) : Tensor(),
                                 gb ? grad_to(mul(g, saved_a.get("mul backward")), sb, db) : Tensor()};
    });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_op(a, b, "div", BinaryOp::div);
  if (autograd::needs_grad({a, b})) {
    // d(a/b)/da = 1/b, d(a/b)/db = -(a/b)/b: b always, the output for b's side; never a.
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    autograd::SavedTensor saved_b(b.detach()), saved_out(gb ? out.detach() : Tensor());
    autograd::record(out, "div", {a, b}, [saved_b, saved_out, sa = a.shape(), sb = b.shape(), da = a.dtype(),
                                          db = b.dtype(), ga, gb](const Tensor& g) {
      const Tensor& bv = saved_b.get("div backward");
      return std::vector<Tensor>{ga ? grad_to(div(g, bv), sa, da) : Tensor(),
                                 gb ? grad_to(neg(div(mul(g, saved_out.get("div backward")), bv)), sb, db) : Tensor()};
    });
  }
  return out;
}

Tensor add_scalar(const Tensor& a, float s) {
  Tensor out = unary_op(a, "add_scalar", UnaryOp::add_scalar, s);
  if (autograd::needs_grad({a}))
    autograd::record(out, "add_scalar", {a}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
  return out;
}

Tensor mul_scalar(const Tensor& a, float s) {
  Tensor out = unary_op(a, "mul_scalar", UnaryOp::mul_scalar, s);
  if (autograd::needs_grad({a}))
    autograd::record(out, "mul_scalar", {a}, [s](const Tensor& g) { return std::vector<Tensor>{mul_scalar(g, s)}; });
  return out;
}

Tensor neg(const Tensor& a) {
  Tensor out = unary_op(a, "neg", UnaryOp::neg);
  if (autograd::needs_grad({a}))
    autograd::record(out, "neg", {a}, [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
  return out;
}

Tensor exp(const Tensor& a) {
  Tensor out = unary_op(a, "exp", UnaryOp::exp);
  if (autograd::needs_grad({a}))
    autograd::record(out, "exp", {a}, [y = autograd::SavedTensor(out.detach())](const Tensor& g) {
      return std::vector<Tensor>{mul(g, y.get("exp backward"))};
    });
  return out;
}

Tensor log(const Tensor& a) {
  Tensor out = unary_op(a, "log", UnaryOp::log);
  if (autograd::needs_grad({a}))
    autograd::record(out, "log", {a}, [x = autograd::SavedTensor(a.detach())](const Tensor& g) {
      return std::vector<Tensor>{div(g, x.get("log backward"))};
    });
  return out;
}

Tensor sqrt(const Tensor& a) {
  Tensor out = unary_op(a, "sqrt", UnaryOp::sqrt);
  if (autograd::needs_grad({a}))
    autograd::record(out, "sqrt", {a}, [y = autograd::SavedTensor(out.detach())](const Tensor& g) {
      return std::vector<Tensor>{div(mul_scalar(g, 0.5f), y.get("sqrt backward"))};
    });
  return out;
}

Tensor pow_scalar(const Tensor& a, float e) {
  Tensor out = unary_op(a, "pow_scalar", UnaryOp::pow_scalar, e);
  if (autograd::needs_grad({a}))
    autograd::record(out, "pow_scalar", {a}, [x = autograd::SavedTensor(a.detach()), e](const Tensor& g) {
      Tensor d = unary_op(x.get("pow_scalar backward"), "pow_scalar backward", UnaryOp::pow_scalar_grad, e);
      return std::vector<Tensor>{mul(g, d)};
    });
  return out;
}

Tensor tanh(const Tensor& a) {
  Tensor out = unary_op(a, "tanh", UnaryOp::tanh);
  if (autograd::needs_grad({a}))
    autograd::record(out, "tanh", {a}, [y = autograd::SavedTensor(out.detach())](const Tensor& g) {
      Tensor d = unary_op(y.get("tanh backward"), "tanh backward", UnaryOp::tanh_grad);
      return std::vector<Tensor>{mul(g, d)};
    });
  return out;
}

}  // namespace cmha
