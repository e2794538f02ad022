// collaborative_queries: the checks and the autograd record; the loops are
// the attention kernels (backend/attention.h).
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/kernels.h"

namespace cmha {

Tensor collaborative_queries(const Tensor& q, const Tensor& mixing, float scale) {
  CMHA_CHECK(q.dtype() == DType::f32 || q.dtype() == DType::bf16,
             "collaborative_queries: expected f32 or bf16 queries, got " + q.describe());
  mixing.check_dtype(DType::f32, "collaborative_queries mixing");
  CMHA_CHECK(q.dim() == 3 && mixing.dim() == 2 && mixing.size(1) == q.size(2),
             "collaborative_queries: queries " + q.describe() + " must be [B, Tq, D~k] and the mixing " +
                 mixing.describe() + " [H, D~k] of the same D~k");
  const Device dev = common_device("collaborative_queries", {q, mixing});
  const int64_t B = q.size(0), Tq = q.size(1), Dk = q.size(2), H = mixing.size(0);
  Tensor qc = q.is_contiguous() ? q.detach() : q.detach().contiguous();
  Tensor mc = mixing.is_contiguous() ? mixing.detach() : mixing.detach().contiguous();
  Tensor out = Tensor::empty({B, H, Tq, Dk + H}, q.dtype(), dev);  // [B, H, Tq, D̃k + H], in q's dtype
  CMHA_KERNEL(dev, attention.collaborative_queries)(qc, mc, out, scale);
  if (autograd::needs_grad({q, mixing})) {
    const bool gq = q.requires_grad(), gm = mixing.requires_grad();
    // The backward kernel reads both (dq needs the mixing, dmixing the queries).
    autograd::SavedTensor saved_q(qc), saved_m(mc);
    autograd::record(out, "collaborative_queries", {q, mixing}, [saved_q, saved_m, gq, gm, scale](const Tensor& g) {
      const Tensor& qs = saved_q.get("collaborative_queries backward");
      const Tensor& ms = saved_m.get("collaborative_queries backward");
      const Device d = common_device("collaborative_queries backward", {qs, g});
      Tensor gc = g.is_contiguous() ? g : g.contiguous();
      Tensor dq = gq ? Tensor::empty(qs.shape(), qs.dtype(), d) : Tensor();
      Tensor dm = gm ? Tensor::empty(ms.shape(), DType::f32, d) : Tensor();
      CMHA_KERNEL(d, attention.collaborative_queries_backward)(qs, ms, gc, dq, dm, scale);
      return std::vector<Tensor>{dq, dm};
    });
  }
  return out;
}

}  // namespace cmha
