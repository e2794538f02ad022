// CUDA kernels: attention (entries of backend/attention.h), in the CPU
// kernel's summation order (dq over heads in order; dmixing over fixed
// 64-row chunks whose sums are added in order).
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernel_table.h"
#ifdef CMHA_WITH_CUDNN
#include "backend/cuda/fused_attention.h"
#endif

namespace cmha::cuda {

namespace {

constexpr int64_t kChunkRows = 64;  // as backend/cpu/attention.cpp

// out[n, h, t, :] = [scale · q[n, t, :] ⊙ mixing[h, :], scale · e_h], one thread per element.
// q, out (and g, dq below): f32 or bf16 each; mixing, dmixing f32.
template <typename Q, typename O>
__global__ void queries_kernel(const Q* q, const float* mixing, O* out, int64_t H, int64_t Tq, int64_t Dk, int64_t n,
                               float scale) {
  const int64_t W = Dk + H;
  CMHA_GRID_STRIDE(i, n) {
    const int64_t d = i % W, row = i / W;  // row = (b·H + h)·Tq + t
    const int64_t t = row % Tq, h = (row / Tq) % H, b = row / (Tq * H);
    st(out[i], d < Dk ? ld(q[(b * Tq + t) * Dk + d]) * (scale * mixing[h * Dk + d]) : (d - Dk == h ? scale : 0.0f));
  }
}

// dq[r, d] = scale · Σ_h g[b, h, t, d] · mixing[h, d] for row r = b·Tq + t.
template <typename G, typename DQ>
__global__ void dq_kernel(const float* mixing, const G* g, DQ* dq, int64_t H, int64_t Tq, int64_t Dk, int64_t n,
                          float scale) {
  const int64_t W = Dk + H;
  CMHA_GRID_STRIDE(i, n) {
    const int64_t d = i % Dk, r = i / Dk, b = r / Tq, t = r % Tq;
    float s = 0.0f;
    for (int64_t h = 0; h < H; ++h) s += ld(g[((b * H + h) * Tq + t) * W + d]) * mixing[h * Dk + d];
    st(dq[i], s * scale);
  }
}

// partial[c, h, d] = Σ_{r in chunk c} g[b, h, t, d] · q[r, d] (rows in order).
template <typename Q, typename G>
__global__ void dmixing_partial_kernel(const Q* q, const G* g, float* partial, int64_t H, int64_t Tq, int64_t Dk,
                                       int64_t rows, int64_t n) {
  const int64_t W = Dk + H;
  CMHA_GRID_STRIDE(i, n) {
    const int64_t d = i % Dk, h = (i / Dk) % H, c = i / (Dk * H);
    const int64_t r1 = min(rows, (c + 1) * kChunkRows);
    float s = 0.0f;
    for (int64_t r = c * kChunkRows; r < r1; ++r) {
      const int64_t b = r / Tq, t = r % Tq;
      s += ld(g[((b * H + h) * Tq + t) * W + d]) * ld(q[r * Dk + d]);
    }
    partial[i] = s;
  }
}

// dmixing[h, d] = scale · Σ_c partial[c, h, d], chunks in order.
__global__ void dmixing_total_kernel(const float* partial, float* dmixing, int64_t chunks, int64_t n, float scale) {
  CMHA_GRID_STRIDE(i, n) {
    float s = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) s += partial[c * n + i];
    dmixing[i] = s * scale;
  }
}

void collaborative_queries(const Tensor& q, const Tensor& mixing, const Tensor& out, float scale) {
  constexpr const char* kName = "attention.collaborative_queries";
  const int64_t Tq = q.size(1), Dk = q.size(2), H = mixing.size(0), n = out.numel();
  if (n == 0) return;
  with_float_types(q, out, kName, [&](auto tq, auto to) {
    using Q = decltype(tq);
    using O = decltype(to);
    queries_kernel<Q, O><<<blocks_for(n), kThreads, 0, launch_stream(out)>>>(
        device_data<Q>(q, kName), device_data<float>(mixing, kName), device_data<O>(out, kName), H, Tq, Dk, n, scale);
  });
  check_launch("attention.collaborative_queries");
}

void collaborative_queries_backward(const Tensor& q, const Tensor& mixing, const Tensor& g, const Tensor& dq,
                                    const Tensor& dmixing, float scale) {
  const int64_t Tq = q.size(1), Dk = q.size(2), H = mixing.size(0), rows = q.size(0) * Tq;
  const cudaStream_t stream = launch_stream(g);
  constexpr const char* kName = "attention.collaborative_queries_backward";
  const auto* pm = device_data<float>(mixing, kName);
  const bool want_dmixing = dmixing.defined() && dmixing.numel() > 0;
  const int64_t chunks = (rows + kChunkRows - 1) / kChunkRows, n = H * Dk;
  Tensor partial;  // [chunks, H, D̃k]
  float* pp = nullptr;
  if (want_dmixing) {
    partial = Tensor::empty({std::max<int64_t>(1, chunks * n)}, DType::f32, g.device());
    pp = static_cast<float*>(partial.raw_data());
  }
  with_float_types(q, g, dq.defined() ? dq : q, kName, [&](auto tq, auto tg, auto td) {
    using Q = decltype(tq);
    using G = decltype(tg);
    using DQ = decltype(td);
    const auto* pq = device_data<Q>(q, kName);
    const auto* pg = device_data<G>(g, kName);
    if (dq.defined() && dq.numel() > 0) {
      dq_kernel<G, DQ><<<blocks_for(dq.numel()), kThreads, 0, stream>>>(pm, pg, device_data<DQ>(dq, kName), H, Tq,
                                                                        Dk, dq.numel(), scale);
      check_launch("attention.collaborative_queries_backward dq");
    }
    if (want_dmixing && chunks > 0) {
      dmixing_partial_kernel<Q, G>
          <<<blocks_for(chunks * n), kThreads, 0, stream>>>(pq, pg, pp, H, Tq, Dk, rows, chunks * n);
      check_launch("attention.collaborative_queries_backward dmixing partial");
    }
  });
  if (!want_dmixing) return;
  float* pdm = device_data<float>(dmixing, "attention.collaborative_queries_backward");
  dmixing_total_kernel<<<blocks_for(n), kThreads, 0, stream>>>(pp, pdm, chunks, n, scale);
  check_launch("attention.collaborative_queries_backward dmixing");
}

#ifndef CMHA_WITH_CUDNN
// Built without cudnn.h: the layers take their unfused path, and the runs
// are never reached (fused_prepare says no).
bool no_fused_prepare(const backend::FusedAttentionArgs&, std::string& reason) {
  reason = "this build has no cuDNN (cudnn.h was not found when cmha was configured): cmha's unfused path";
  return false;
}
void no_fused_forward(const backend::FusedAttentionArgs&, const Tensor&, const Tensor&, uint64_t, uint64_t) {
  throw Error("attention.fused_forward: this build has no cuDNN");
}
void no_fused_backward(const backend::FusedAttentionArgs&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                       const Tensor&, const Tensor&, uint64_t, uint64_t) {
  throw Error("attention.fused_backward: this build has no cuDNN");
}
#endif

}  // namespace

backend::AttentionKernels attention_kernels() {
  backend::AttentionKernels k;
  k.collaborative_queries = collaborative_queries;
  k.collaborative_queries_backward = collaborative_queries_backward;
#ifdef CMHA_WITH_CUDNN
  k.fused_prepare = fused_attention_prepare;
  k.fused_forward = fused_attention_forward;
  k.fused_backward = fused_attention_backward;
#else
  k.fused_prepare = no_fused_prepare;
  k.fused_forward = no_fused_forward;
  k.fused_backward = no_fused_backward;
#endif
  return k;
}

}  // namespace cmha::cuda
