// fused_attention: the checks, the layouts and the autograd record of fused
// scaled-dot-product attention; the kernels are the attention family's
// fused_* entries (backend/attention.h: cuDNN's SDPA on CUDA).
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/kernels.h"

namespace cmha {

namespace {

// The dims of x with more than one element, outermost (largest stride) first.
std::vector<int64_t> layout_order(const Tensor& x) {
  std::vector<int64_t> order(static_cast<size_t>(x.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return x.strides()[a] > x.strides()[b]; });
  return order;
}

// A permutation of a contiguous tensor (size-1 dims aside): what the fused
// kernels take, and what empty_like_layout can reproduce.
bool is_dense(const Tensor& x) {
  int64_t expected = 1;
  const std::vector<int64_t> order = layout_order(x);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (x.shape()[*it] == 1) continue;
    if (x.strides()[*it] != expected) return false;
    expected *= x.shape()[*it];
  }
  return true;
}

// An uninitialised tensor of x's shape and dtype whose strides equal x's on
// every dim of more than one element (x dense).
Tensor empty_like_layout(const Tensor& x, DType dtype) {
  const std::vector<int64_t> order = layout_order(x);
  Shape stored;
  for (int64_t d : order) stored.push_back(x.shape()[d]);
  std::vector<int64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  return Tensor::empty(stored, dtype, x.device()).permute(inverse);
}

bool same_layout(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.shape()[d] > 1 && a.strides()[d] != b.strides()[d]) return false;
  return true;
}

// An operand as the entries take it: dense, last stride 1, 16-byte aligned.
Tensor fused_operand(const Tensor& x) {
  const bool ok = is_dense(x) && (x.dim() == 0 || x.strides().back() == 1 || x.shape().back() == 1) &&
                  reinterpret_cast<uintptr_t>(x.raw_data()) % 16 == 0;
  return ok ? x.detach() : x.detach().contiguous();
}

backend::FusedAttentionArgs args_of(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const FusedAttentionOptions& o) {
  backend::FusedAttentionArgs a;
  a.q = fused_operand(q);
  a.k = fused_operand(k);
  a.v = fused_operand(v);
  a.key_padding = o.key_padding;
  a.scale = o.scale;
  a.causal = o.causal;
  a.dropout = o.dropout;
  a.training = autograd::needs_grad({q, k, v});
  return a;
}

void check_fused_operands(const Tensor& q, const Tensor& k, const Tensor& v, const FusedAttentionOptions& o) {
  CMHA_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
             "fused_attention: q, k, v must be [B, H, T, d], got " + q.describe() + ", " + k.describe() + ", " +
                 v.describe());
  common_device("fused_attention", {q, k, v, o.key_padding});
  CMHA_CHECK(o.dropout >= 0.0f && o.dropout < 1.0f, "fused_attention: dropout must be in [0, 1)");
  CMHA_CHECK(o.dropout == 0.0f || o.generator != nullptr, "fused_attention: dropout needs a generator");
}

}  // namespace

bool fused_attention_supported(const Tensor& q, const Tensor& k, const Tensor& v, const FusedAttentionOptions& o,
                               std::string& reason) {
  check_fused_operands(q, k, v, o);
  const Device dev = q.device();
  return CMHA_KERNEL(dev, attention.fused_prepare)(args_of(q, k, v, o), reason);
}

Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const FusedAttentionOptions& o) {
  check_fused_operands(q, k, v, o);
  const Device dev = q.device();
  const backend::FusedAttentionArgs a = args_of(q, k, v, o);
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2), Dv = v.size(3);
  // [B, Tq, H, Dv] stored, seen as [B, H, Tq, Dv]: merge_heads' permute is then a view.
  Tensor out = Tensor::empty({B, Tq, H, Dv}, q.dtype(), dev).permute({0, 2, 1, 3});
  Tensor stats = a.training ? Tensor::empty({B, H, Tq, 1}, DType::f32, dev) : Tensor();
  // The counters unfused dropout on the [B, H, Tq, Tk] weights would reserve,
  // so the layers after it draw the same stream on either path.
  uint64_t seed = 0, offset = 0;
  if (o.dropout > 0) {
    seed = o.generator->seed();
    offset = o.generator->reserve(static_cast<uint64_t>(B * H * Tq * Tk));
  }
  CMHA_KERNEL(dev, attention.fused_forward)(a, out, stats, seed, offset);
  if (a.training) {
    autograd::SavedTensor sq(a.q), sk(a.k), sv(a.v), so(out.detach()), ss(stats);
    const bool gq = q.requires_grad(), gk = k.requires_grad(), gv = v.requires_grad();
    backend::FusedAttentionArgs shape_only = a;  // the flags; the operands come from the saved tensors
    shape_only.q = shape_only.k = shape_only.v = Tensor();
    autograd::record(out, "fused_attention", {q, k, v},
                     [sq, sk, sv, so, ss, shape_only, seed, offset, gq, gk, gv](const Tensor& g) {
                       backend::FusedAttentionArgs b = shape_only;
                       b.q = sq.get("fused_attention backward");
                       b.k = sk.get("fused_attention backward");
                       b.v = sv.get("fused_attention backward");
                       const Tensor& o_saved = so.get("fused_attention backward");
                       const Tensor& st = ss.get("fused_attention backward");
                       // dO in out's layout and dtype, as the backward graph was built.
                       Tensor d_out = g;
                       if (g.dtype() != o_saved.dtype() || !same_layout(g, o_saved)) {
                         d_out = empty_like_layout(o_saved, o_saved.dtype());
                         d_out.copy_(g.dtype() == o_saved.dtype() ? g : g.detach().to(o_saved.dtype()));
                       }
                       Tensor dq = empty_like_layout(b.q, b.q.dtype());
                       Tensor dk = empty_like_layout(b.k, b.k.dtype());
                       Tensor dv = empty_like_layout(b.v, b.v.dtype());
                       if (b.key_padding.defined()) {
                         // cuDNN leaves the rows of padding keys unwritten: their
                         // gradient is 0, not what the pool held (NaN, once).
                         CMHA_KERNEL(b.q.device(), copy.fill)(dk, 0.0);
                         CMHA_KERNEL(b.q.device(), copy.fill)(dv, 0.0);
                       }
                       CMHA_KERNEL(b.q.device(), attention.fused_backward)(b, o_saved, st, d_out, dq, dk, dv, seed,
                                                                          offset);
                       return std::vector<Tensor>{gq ? dq : Tensor(), gk ? dk : Tensor(), gv ? dv : Tensor()};
                     });
  }
  return out;
}

}  // namespace cmha
