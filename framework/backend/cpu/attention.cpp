// CPU kernels: attention (entries of backend/attention.h).
#include <algorithm>
#include <string>
#include <vector>

#include "backend/cpu/kernel_table.h"
#include "backend/cpu/parallel.h"

namespace cmha::cpu {

namespace {

// dmixing is summed over rows (n, t) in chunks of this many rows, then the
// chunk sums are added in order: the result does not depend on the thread count.
constexpr int64_t kChunkRows = 64;

void collaborative_queries(const Tensor& q, const Tensor& mixing, const Tensor& out, float scale) {
  const int64_t N = q.size(0), Tq = q.size(1), Dk = q.size(2), H = mixing.size(0), W = Dk + H;
  const float* pq = q.data<float>("attention.collaborative_queries");
  const float* pm = mixing.data<float>("attention.collaborative_queries");
  float* po = out.data<float>("attention.collaborative_queries");
  std::vector<float> m(static_cast<size_t>(H * Dk));  // scale folded into the mixing rows
  for (size_t i = 0; i < m.size(); ++i) m[i] = scale * pm[i];
#pragma omp parallel for collapse(2) schedule(static) if (out.numel() >= kParallelMin)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h) {
      const float* mh = m.data() + h * Dk;
      for (int64_t t = 0; t < Tq; ++t) {
        const float* qr = pq + (n * Tq + t) * Dk;
        float* o = po + ((n * H + h) * Tq + t) * W;
#pragma omp simd
        for (int64_t d = 0; d < Dk; ++d) o[d] = qr[d] * mh[d];
        for (int64_t j = 0; j < H; ++j) o[Dk + j] = j == h ? scale : 0.0f;
      }
    }
}

// One pass over g: each chunk of rows writes its rows' dq and its own slice
// of the dmixing partial sums.
void collaborative_queries_backward(const Tensor& q, const Tensor& mixing, const Tensor& g, const Tensor& dq,
                                    const Tensor& dmixing, float scale) {
  const int64_t N = q.size(0), Tq = q.size(1), Dk = q.size(2), H = mixing.size(0), W = Dk + H;
  const int64_t rows = N * Tq, chunks = (rows + kChunkRows - 1) / kChunkRows;
  const float* pq = q.data<float>("attention.collaborative_queries_backward");
  const float* pm = mixing.data<float>("attention.collaborative_queries_backward");
  const float* pg = g.data<float>("attention.collaborative_queries_backward");
  float* pdq = dq.defined() ? dq.data<float>("attention.collaborative_queries_backward") : nullptr;
  std::vector<float> partial(dmixing.defined() ? static_cast<size_t>(chunks * H * Dk) : 0, 0.0f);  // [chunks, H, D̃k]
#pragma omp parallel for schedule(static) if (g.numel() >= kParallelMin)
  for (int64_t c = 0; c < chunks; ++c) {
    float* part = partial.empty() ? nullptr : partial.data() + c * H * Dk;
    for (int64_t r = c * kChunkRows; r < std::min(rows, (c + 1) * kChunkRows); ++r) {
      const int64_t n = r / Tq, t = r % Tq;
      const float* qr = pq + r * Dk;
      float* dqr = pdq ? pdq + r * Dk : nullptr;
      if (dqr) std::fill(dqr, dqr + Dk, 0.0f);
      for (int64_t h = 0; h < H; ++h) {
        const float* gr = pg + ((n * H + h) * Tq + t) * W;
        const float* mh = pm + h * Dk;
        if (dqr) {
#pragma omp simd
          for (int64_t d = 0; d < Dk; ++d) dqr[d] += gr[d] * mh[d];
        }
        if (part) {
          float* ph = part + h * Dk;
#pragma omp simd
          for (int64_t d = 0; d < Dk; ++d) ph[d] += gr[d] * qr[d];
        }
      }
      if (dqr) {
#pragma omp simd
        for (int64_t d = 0; d < Dk; ++d) dqr[d] *= scale;
      }
    }
  }
  if (!dmixing.defined()) return;
  float* pdm = dmixing.data<float>("attention.collaborative_queries_backward");
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
