// matmul and linear through the matmul kernel (oneDNN on the CPU). Backward
// passes transposed views straight to the kernel (it takes strides), so no
// transpose is ever copied.
#include <algorithm>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/kernels.h"
#include "backend/working_copy.h"

namespace cmha {

namespace {

void check_matmul_operand(const Tensor& t, const char* op) {
  CMHA_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::bf16,
             std::string(op) + ": expected f32 or bf16, got " + t.describe());
}

// oneDNN wants the last two dims dense in one orientation; anything else
// (e.g. a slice with a step) is copied first.
Tensor dense_inner(const Tensor& t) {
  const int64_t n = t.dim();
  const Shape& s = t.strides();
  const Shape& sh = t.shape();
  const bool row_major = s[n - 1] == 1 || sh[n - 1] == 1;
  const bool col_major = s[n - 2] == 1 || sh[n - 2] == 1;
  if ((row_major && (s[n - 2] >= sh[n - 1] || sh[n - 2] == 1)) ||
      (col_major && (s[n - 1] >= sh[n - 2] || sh[n - 1] == 1)))
    return t;
  return t.contiguous();
}

// Pads t with leading size-1 dims up to n dims (a view).
Tensor lead_pad(const Tensor& t, int64_t n) {
  Tensor r = t;
  while (r.dim() < n) r = r.unsqueeze(0);
  return r;
}

// a[..., M, K] @ b[..., K, N] without autograd, written in out_dtype.
Tensor matmul_forward(const Tensor& a, const Tensor& b, DType out_dtype) {
  CMHA_CHECK(a.dim() >= 2 && b.dim() >= 2,
             "matmul: both operands need at least 2 dims, got " + a.describe() + " and " + b.describe());
  CMHA_CHECK(a.dtype() == b.dtype(), "matmul: dtypes differ: " + a.describe() + " and " + b.describe());
  CMHA_CHECK(a.size(-1) == b.size(-2), "matmul: inner sizes differ: " + a.describe() + " @ " + b.describe());
  const Shape batch_a(a.shape().begin(), a.shape().end() - 2), batch_b(b.shape().begin(), b.shape().end() - 2);
  const Device dev = common_device("matmul", {a, b});
  Shape out_shape = broadcast_shapes(batch_a, batch_b, "matmul");
  out_shape.push_back(a.size(-2));
  out_shape.push_back(b.size(-1));
  const int64_t n = static_cast<int64_t>(out_shape.size());
  Tensor out = Tensor::empty(out_shape, out_dtype, dev);
  if (out.numel() == 0) return out;
  if (a.size(-1) == 0) {
    out.zero_();
    return out;
  }
  CMHA_KERNEL(dev, matmul.matmul)(dense_inner(lead_pad(a, n)), dense_inner(lead_pad(b, n)), Tensor(), out);
  return out;
}

}  // namespace

namespace {

// When b is shared across a's trailing batch dims (b's size 1 there: the
// shared keys of multi-query, grouped and collaborative attention) and a is
// contiguous, those dims fold into a's rows: [..., G, M, K] @ [..., 1, K, N]
// is one [..., G·M, K] @ [..., K, N] GEMM. Its backward then gets dB from one
// GEMM over G·M rows instead of G products summed afterwards. Undefined when
// there is nothing to fold.
Tensor matmul_folding_shared_b(const Tensor& a, const Tensor& b, DType out_dtype) {
  const int64_t n = std::max(a.dim(), b.dim());
  if (a.dim() < 3 || a.dim() < b.dim() || b.dim() < 2 || !a.is_contiguous() || a.size(-1) != b.size(-2) ||
      a.dtype() != b.dtype())
    return Tensor();  // the plain path (and its errors)
  Tensor bp = b;
  while (bp.dim() < n) bp = bp.unsqueeze(0);
  int64_t first = n - 2, rows = a.size(-2);  // a's dims [first, n-2) fold into its rows
  while (first > 0 && bp.size(first - 1) == 1) rows *= a.size(--first);
  if (first == n - 2 || rows == a.size(-2)) return Tensor();
  Shape a_shape(a.shape().begin(), a.shape().begin() + first);
  a_shape.push_back(rows);
  a_shape.push_back(a.size(-1));
  for (int64_t d = n - 3; d >= first; --d) bp = bp.squeeze(d);
  Shape out_shape = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                     Shape(b.shape().begin(), b.shape().end() - 2), "matmul");
  out_shape.push_back(a.size(-2));
  out_shape.push_back(b.size(-1));
  return matmul(a.view(a_shape), bp, out_dtype).view(out_shape);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  return matmul(a, b, autograd::autocast_bf16() ? DType::bf16 : a.dtype());
}

Tensor matmul(const Tensor& a, const Tensor& b, DType out_dtype) {
  check_matmul_operand(a, "matmul");
  check_matmul_operand(b, "matmul");
  CMHA_CHECK(out_dtype == DType::f32 || out_dtype == DType::bf16,
             std::string("matmul: the result must be f32 or bf16, not ") + dtype_name(out_dtype));
  // Under bf16 autocast an f32 operand is cast (recorded: its gradient comes
  // back in f32) and the GEMM reads bf16.
  if (autograd::autocast_bf16() && (a.dtype() == DType::f32 || b.dtype() == DType::f32))
    return matmul(a.to(DType::bf16), b.to(DType::bf16), out_dtype);
  if (Tensor folded = matmul_folding_shared_b(a, b, out_dtype); folded.defined()) return folded;
  Tensor out = matmul_forward(a.detach(), b.detach(), out_dtype);
  if (autograd::needs_grad({a, b})) {
    // dA = g · Bᵀ, dB = Aᵀ · g, then undo batch broadcasting: each side needs only the other.
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    autograd::SavedTensor saved_a(gb ? a.detach() : Tensor()), saved_b(ga ? b.detach() : Tensor());
    autograd::record(out, "matmul", {a, b},
                     [saved_a, saved_b, sa = a.shape(), sb = b.shape(), dtype = a.dtype(), ga, gb](const Tensor& g) {
                       // The GEMMs read g in the operands' dtype (an f32 gradient of f32
                       // scores from bf16 operands is cast) and write each gradient in it;
                       // one summed over broadcast batch dims is summed in f32 first.
                       const Tensor gm = g.to(dtype);
                       auto product = [&](const Tensor& x, const Tensor& y, const Shape& want) {
                         Shape got = g.shape();
                         got[got.size() - 2] = x.size(-2);
                         got.back() = y.size(-1);
                         if (got == want) return matmul_forward(x, y, dtype);
                         return sum_to(matmul_forward(x, y, DType::f32), want).to(dtype);
                       };
                       Tensor da = ga ? product(gm, saved_b.get("matmul backward").transpose(-1, -2), sa) : Tensor();
                       Tensor db = gb ? product(saved_a.get("matmul backward").transpose(-1, -2), gm, sb) : Tensor();
                       return std::vector<Tensor>{da, db};
                     });
  }
  return out;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  check_matmul_operand(x, "linear");
  check_matmul_operand(w, "linear");
  CMHA_CHECK(w.dim() == 2, "linear: weight must be [out, in], got " + w.describe());
  CMHA_CHECK(x.dim() >= 1 && x.size(-1) == w.size(1),
             "linear: input " + x.describe() + " does not end in the weight's in-size " + std::to_string(w.size(1)) +
                 " (weight " + w.describe() + ")");
  CMHA_CHECK(x.dtype() == w.dtype() || autograd::autocast_bf16(),
             "linear: dtypes differ: " + x.describe() + " and " + w.describe());
  if (bias.defined()) {
    CMHA_CHECK(bias.dim() == 1 && bias.size(0) == w.size(0),
               "linear: bias must be [" + std::to_string(w.size(0)) + "], got " + bias.describe());
    bias.check_dtype(DType::f32, "linear bias");
  }
  const Device dev = common_device("linear", {x, w, bias});
  const int64_t in = w.size(1), outf = w.size(0);
  // Under bf16 autocast the GEMMs read bf16 (copies of an f32 x and W) and
  // write a bf16 activation; dx comes back in x's dtype, dW and dbias in f32.
  const bool bf16 = autograd::autocast_bf16();
  const DType x_dtype = x.dtype(), out_dtype = bf16 ? DType::bf16 : x_dtype;
  // Shapes: x[..., in] -> x2[N, in] -> y2[N, out] -> y[..., out]
  Tensor x2 = x.detach().reshape({-1, in});
  Tensor w2 = w.detach();
  if (bf16) {  // no copy when x is bf16 already (the output of a bf16 layer)
    x2 = x2.to(DType::bf16);
    // An f32 weight's bf16 copy is kept between forwards and rewritten by
    // the optimiser's update (backend/working_copy.h).
    if (w.dtype() == DType::f32) w2 = backend::bf16_working_copy(w);
  }
  Tensor y2 = Tensor::empty({x2.size(0), outf}, out_dtype, dev);
  if (y2.numel() > 0)
    CMHA_KERNEL(dev, matmul.matmul)(dense_inner(x2), w2.transpose(0, 1),
                                    bias.defined() ? bias.detach().contiguous() : Tensor(), y2);
  Shape out_shape = x.shape();
  out_shape.back() = outf;
  Tensor out = y2.view(out_shape);
  if (autograd::needs_grad({x, w, bias})) {
    const bool gx = x.requires_grad(), gw = w.requires_grad(), gbias = bias.defined() && bias.requires_grad();
    Shape x_shape = x.shape();
    // dx needs the weight, dW the input (the bf16 copies under autocast).
    autograd::SavedTensor saved_x(gw ? x2 : Tensor()), saved_w(gx ? w2 : Tensor());
    autograd::record(out, "linear", {x, w, bias},
                     [saved_x, saved_w, gx, gw, gbias, x_shape, in, outf, x_dtype, w_dtype = w.dtype(),
                      gemm_dtype = x2.dtype()](const Tensor& g) {
                       Tensor g2 = g.reshape({-1, outf});  // [N, out]
                       Tensor gm = dense_inner(g2.to(gemm_dtype));
                       const Tensor& ws = saved_w.get("linear backward");
                       const Tensor& xs = saved_x.get("linear backward");
                       const Device gdev = common_device("linear backward", {gm, xs, ws});
                       std::vector<Tensor> grads(3);
                       if (gx) {  // [N, out] @ [out, in] -> [N, in]
                         Tensor dx = Tensor::empty({g2.size(0), in}, x_dtype, gdev);
                         CMHA_KERNEL(gdev, matmul.matmul)(gm, ws, Tensor(), dx);
                         grads[0] = dx.view(x_shape);
                       }
                       if (gw) {  // [out, N] @ [N, in] -> [out, in]
                         Tensor dw = Tensor::empty({outf, in}, w_dtype, gdev);
                         CMHA_KERNEL(gdev, matmul.matmul)(gm.transpose(0, 1), dense_inner(xs), Tensor(), dw);
                         grads[1] = dw;
                       }
                       if (gbias) grads[2] = sum(g2, {0});  // f32, whatever g's dtype
                       return grads;
                     });
  }
  return out;
}

}  // namespace cmha
