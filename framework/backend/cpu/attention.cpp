// CPU kernels: attention (entries of backend/attention.h).
#include <algorithm>
#include <string>
#include <vector>

#include "backend/cpu/element.h"
#include "backend/cpu/kernel_table.h"
#include "backend/cpu/parallel.h"

namespace cmha::cpu {

namespace {

// dmixing is summed over rows (n, t) in chunks of this many rows, then the
// chunk sums are added in order: the result does not depend on the thread count.
constexpr int64_t kChunkRows = 64;

// q, out: f32 or bf16 each (f32 arithmetic); mixing f32.
void collaborative_queries(const Tensor& q, const Tensor& mixing, const Tensor& out, float scale) {
  const int64_t N = q.size(0), Tq = q.size(1), Dk = q.size(2), H = mixing.size(0), W = Dk + H;
  const char* kernel = "attention.collaborative_queries";
  const float* pm = mixing.data<float>(kernel);
  std::vector<float> m(static_cast<size_t>(H * Dk));  // scale folded into the mixing rows
  for (size_t i = 0; i < m.size(); ++i) m[i] = scale * pm[i];
  with_float_types(q, out, kernel, [&](auto tq, auto to) {
    using Q = decltype(tq);
    using O = decltype(to);
    const Q* pq = q.data<Q>(kernel);
    O* po = out.data<O>(kernel);
#pragma omp parallel for collapse(2) schedule(static) if (out.numel() >= kParallelMin)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h) {
        const float* mh = m.data() + h * Dk;
        for (int64_t t = 0; t < Tq; ++t) {
          const Q* qr = pq + (n * Tq + t) * Dk;
          O* o = po + ((n * H + h) * Tq + t) * W;
#pragma omp simd
          for (int64_t d = 0; d < Dk; ++d) st(o[d], ld(qr[d]) * mh[d]);
          for (int64_t j = 0; j < H; ++j) st(o[Dk + j], j == h ? scale : 0.0f);
        }
      }
  });
}

// One pass over g: each chunk of rows writes its rows' dq and its own slice
// of the dmixing partial sums. q, g, dq f32 or bf16 each; mixing, dmixing f32.
void collaborative_queries_backward(const Tensor& q, const Tensor& mixing, const Tensor& g, const Tensor& dq,
                                    const Tensor& dmixing, float scale) {
  const int64_t N = q.size(0), Tq = q.size(1), Dk = q.size(2), H = mixing.size(0), W = Dk + H;
  const int64_t rows = N * Tq, chunks = (rows + kChunkRows - 1) / kChunkRows;
  const char* kernel = "attention.collaborative_queries_backward";
  const float* pm = mixing.data<float>(kernel);
  std::vector<float> partial(dmixing.defined() ? static_cast<size_t>(chunks * H * Dk) : 0, 0.0f);  // [chunks, H, D̃k]
  with_float_types(q, g, dq.defined() ? dq : q, kernel, [&](auto tq, auto tg, auto td) {
    using Q = decltype(tq);
    using G = decltype(tg);
    using DQ = decltype(td);
    const Q* pq = q.data<Q>(kernel);
    const G* pg = g.data<G>(kernel);
    DQ* pdq = dq.defined() ? dq.data<DQ>(kernel) : nullptr;
#pragma omp parallel for schedule(static) if (g.numel() >= kParallelMin)
    for (int64_t c = 0; c < chunks; ++c) {
      float* part = partial.empty() ? nullptr : partial.data() + c * H * Dk;
      std::vector<float> dq_row(pdq ? static_cast<size_t>(Dk) : 0);  // one row of dq, summed over heads in f32
      for (int64_t r = c * kChunkRows; r < std::min(rows, (c + 1) * kChunkRows); ++r) {
        const int64_t n = r / Tq, t = r % Tq;
        const Q* qr = pq + r * Dk;
        float* dqr = pdq ? dq_row.data() : nullptr;
        if (dqr) std::fill(dqr, dqr + Dk, 0.0f);
        for (int64_t h = 0; h < H; ++h) {
          const G* gr = pg + ((n * H + h) * Tq + t) * W;
          const float* mh = pm + h * Dk;
          if (dqr) {
#pragma omp simd
            for (int64_t d = 0; d < Dk; ++d) dqr[d] += ld(gr[d]) * mh[d];
          }
          if (part) {
            float* ph = part + h * Dk;
#pragma omp simd
            for (int64_t d = 0; d < Dk; ++d) ph[d] += ld(gr[d]) * ld(qr[d]);
          }
        }
        if (dqr) {
          DQ* out_row = pdq + r * Dk;
#pragma omp simd
          for (int64_t d = 0; d < Dk; ++d) st(out_row[d], dqr[d] * scale);
        }
      }
    }
  });
  if (!dmixing.defined()) return;
  float* pdm = dmixing.data<float>(kernel);
  std::fill(pdm, pdm + H * Dk, 0.0f);
  for (int64_t c = 0; c < chunks; ++c) {
    const float* part = partial.data() + c * H * Dk;
#pragma omp simd
    for (int64_t i = 0; i < H * Dk; ++i) pdm[i] += part[i];
  }
  for (int64_t i = 0; i < H * Dk; ++i) pdm[i] *= scale;
}

// The CPU has no fused attention: the layers take cmha's unfused path (the
// CPU table leaves fused_forward and fused_backward empty).
bool fused_prepare(const backend::FusedAttentionArgs&, std::string& reason) {
  reason = "CPU: cmha's unfused path";
  return false;
}

}  // namespace

backend::AttentionKernels attention_kernels() {
  backend::AttentionKernels k;
  k.collaborative_queries = collaborative_queries;
  k.collaborative_queries_backward = collaborative_queries_backward;
  k.fused_prepare = fused_prepare;
  return k;
}

}  // namespace cmha::cpu
