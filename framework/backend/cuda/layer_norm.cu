// CUDA kernels: layer_norm (entries of backend/layer_norm.h), over the last dim.
//
// Forward: a group (warp, or block for rows over kWarpRowMax) per row of D:
// μ and rstd two-pass in double as the CPU's (the deviations rounded to f32
// first, as there), then y = (x - μ)·rstd·w + b in f32.
//
// Backward:
// - dx: a group per row, the row means of ĝ and ĝ·x̂ in f32 as the CPU's;
// - dweight, dbias: thread (chunk c, column j) sums g·x̂ and g over the rows
//   of chunk c, in row order and in double, into partial[c, 2, D]; a second
//   pass adds the chunks in order. The chunks depend on the row count only,
//   so the sums do not depend on the GPU or the launch, and no two threads
//   ever add to one value (no atomics).
#include <algorithm>
#include <cmath>

#include "backend/cuda/kernel_table.h"
#include "backend/cuda/row_reduce.cuh"

namespace cmha::cuda {

namespace {

// ---- forward ----

// x, y (and in the backward g, dx): f32 or bf16 each; statistics in f32/double.
template <int kGroup, typename X, typename Y>
__global__ void __launch_bounds__(kRowBlock<kGroup>) forward_kernel(const X* x, const float* w, const float* b, Y* y, float* mean, float* rstd,
                               int64_t rows, int64_t d, float eps) {
  using Group = RowGroup<kGroup>;
  __shared__ double scratch[32];
  CMHA_ROWS(r, rows, Group) {
    const X* xr = x + r * d;
    Y* yr = y + r * d;
    double sum = 0.0;
    for (int64_t j = Group::lane(); j < d; j += kGroup) sum += ld(xr[j]);
    sum = Group::sum(sum, scratch);
    const float mu = static_cast<float>(sum / static_cast<double>(d));
    double sq = 0.0;
    for (int64_t j = Group::lane(); j < d; j += kGroup) {
      const double dev = ld(xr[j]) - mu;  // an f32 difference, as the CPU's
      sq += dev * dev;
    }
    sq = Group::sum(sq, scratch);
    const float rs = static_cast<float>(1.0 / sqrt(sq / static_cast<double>(d) + eps));
    if (Group::lane() == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    for (int64_t j = Group::lane(); j < d; j += kGroup) {
      float v = (ld(xr[j]) - mu) * rs;
      if (w) v *= w[j];
      if (b) v += b[j];
      st(yr[j], v);
    }
  }
}

void forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, const Tensor& mean,
             const Tensor& rstd, float eps) {
  const int64_t d = x.shape().back(), rows = mean.numel();
  if (rows == 0) return;
  const cudaStream_t stream = launch_stream(x);
  const auto* w = weight.defined() ? static_cast<const float*>(weight.raw_data()) : nullptr;
  const auto* b = bias.defined() ? static_cast<const float*>(bias.raw_data()) : nullptr;
  with_float_types(x, y, "layer_norm.forward", [&](auto tx, auto ty) {
    using X = decltype(tx);
    using Y = decltype(ty);
    with_row_group(d, [&](auto group) {
      constexpr int G = decltype(group)::value;
      forward_kernel<G, X, Y><<<row_blocks<G>(rows), row_threads<G>(), 0, stream>>>(
          static_cast<const X*>(x.raw_data()), w, b, static_cast<Y*>(y.raw_data()),
          static_cast<float*>(mean.raw_data()), static_cast<float*>(rstd.raw_data()), rows, d, eps);
      check_launch("layer_norm.forward");
    });
  });
}

// ---- backward ----

// With x̂ = (x - μ)·rstd and ĝ = g·w:  dx = rstd · (ĝ - mean(ĝ) - x̂ · mean(ĝ·x̂)).
template <int kGroup, typename X, typename G, typename DX>
__global__ void __launch_bounds__(kRowBlock<kGroup>) dx_kernel(const X* x, const float* w, const G* g, const float* mean, const float* rstd, DX* dx,
                          int64_t rows, int64_t d) {
  using Group = RowGroup<kGroup>;
  __shared__ float scratch[32];
  CMHA_ROWS(r, rows, Group) {
    const X* xr = x + r * d;
    const G* gr = g + r * d;
    DX* dr = dx + r * d;
    const float mu = mean[r], rs = rstd[r];
    float sg = 0.0f, sgx = 0.0f;
    for (int64_t j = Group::lane(); j < d; j += kGroup) {
      const float gh = w ? ld(gr[j]) * w[j] : ld(gr[j]);
      sg += gh;
      sgx += gh * ((ld(xr[j]) - mu) * rs);
    }
    sg = Group::sum(sg, scratch);
    sgx = Group::sum(sgx, scratch);
    const float mean_g = sg / static_cast<float>(d), mean_gx = sgx / static_cast<float>(d);
    for (int64_t j = Group::lane(); j < d; j += kGroup) {
      const float xh = (ld(xr[j]) - mu) * rs;
      const float gh = w ? ld(gr[j]) * w[j] : ld(gr[j]);
      st(dr[j], rs * (gh - mean_g - xh * mean_gx));
    }
  }
}

// How the rows are cut for dweight/dbias: chunks of `length` rows, at least
// 32 and at most 256 chunks (a function of the row count alone).
struct RowChunks {
  int64_t length = 1, count = 0;
};
RowChunks row_chunks(int64_t rows) {
  RowChunks c;
  if (rows == 0) return c;
  c.length = std::max<int64_t>(32, (rows + 255) / 256);
  c.count = (rows + c.length - 1) / c.length;
  return c;
}

// partial[c, 0, j] = Σ_{r in chunk c} g·x̂, partial[c, 1, j] = Σ g (double, in row order).
template <typename X, typename G>
__global__ void affine_partial_kernel(const X* x, const G* g, const float* mean, const float* rstd, double* partial,
                                      int64_t rows, int64_t d, RowChunks chunks) {
  CMHA_GRID_STRIDE(i, chunks.count * d) {
    const int64_t c = i / d, j = i % d;
    const int64_t r0 = c * chunks.length, r1 = std::min(rows, r0 + chunks.length);
    double sw = 0.0, sb = 0.0;
    for (int64_t r = r0; r < r1; ++r) {
      const float gv = ld(g[r * d + j]);
      sw += gv * ((ld(x[r * d + j]) - mean[r]) * rstd[r]);  // the f32 product, as the CPU's
      sb += gv;
    }
    partial[(c * 2) * d + j] = sw;
    partial[(c * 2 + 1) * d + j] = sb;
  }
}

// dweight[j] = Σ_c partial[c, 0, j], dbias[j] = Σ_c partial[c, 1, j], in chunk
// order (0 over no rows). Either output may be null (not wanted).
__global__ void affine_total_kernel(const double* partial, int64_t chunks, int64_t d, float* dweight,
                                    float* dbias) {
  CMHA_GRID_STRIDE(j, d) {
    double sw = 0.0, sb = 0.0;
    for (int64_t c = 0; c < chunks; ++c) {
      sw += partial[(c * 2) * d + j];
      sb += partial[(c * 2 + 1) * d + j];
    }
    if (dweight) dweight[j] = static_cast<float>(sw);
    if (dbias) dbias[j] = static_cast<float>(sb);
  }
}

void backward(const Tensor& x, const Tensor& weight, const Tensor& g, const Tensor& mean, const Tensor& rstd,
              const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const int64_t d = x.shape().back(), rows = mean.numel();
  const cudaStream_t stream = launch_stream(x);
  const auto* pmean = static_cast<const float*>(mean.raw_data());
  const auto* prstd = static_cast<const float*>(rstd.raw_data());
  const bool affine = (dweight.defined() || dbias.defined()) && d > 0;
  const RowChunks chunks = row_chunks(rows);
  Tensor partial;  // [chunks, 2, D] doubles (held as i64 of the same width)
  double* pp = nullptr;
  // dx takes its own dtype (x's when not wanted: nothing writes it).
  with_float_types(x, g, dx.defined() ? dx : x, "layer_norm.backward", [&](auto tx, auto tg, auto td) {
    using X = decltype(tx);
    using Gr = decltype(tg);
    using DX = decltype(td);
    const auto* px = static_cast<const X*>(x.raw_data());
    const auto* pg = static_cast<const Gr*>(g.raw_data());
    if (dx.defined() && rows > 0 && d > 0) {
      const auto* w = weight.defined() ? static_cast<const float*>(weight.raw_data()) : nullptr;
      with_row_group(d, [&](auto group) {
        constexpr int G = decltype(group)::value;
        dx_kernel<G, X, Gr, DX><<<row_blocks<G>(rows), row_threads<G>(), 0, stream>>>(
            px, w, pg, pmean, prstd, static_cast<DX*>(dx.raw_data()), rows, d);
        check_launch("layer_norm.backward dx");
      });
    }
    if (affine && chunks.count > 0) {
      partial = Tensor::empty({chunks.count * 2 * d}, DType::i64, x.device());
      pp = static_cast<double*>(partial.raw_data());
      affine_partial_kernel<X, Gr><<<blocks_for(chunks.count * d), kThreads, 0, stream>>>(px, pg, pmean, prstd, pp,
                                                                                           rows, d, chunks);
      check_launch("layer_norm.backward affine partial");
    }
  });
  if (!affine) return;
  affine_total_kernel<<<blocks_for(d), kThreads, 0, stream>>>(
      pp, chunks.count, d, dweight.defined() ? static_cast<float*>(dweight.raw_data()) : nullptr,
      dbias.defined() ? static_cast<float*>(dbias.raw_data()) : nullptr);
  check_launch("layer_norm.backward affine total");
}

}  // namespace

backend::LayerNormKernels layer_norm_kernels() {
  backend::LayerNormKernels k;
  k.forward = forward;
  k.backward = backward;
  return k;
}

}  // namespace cmha::cuda
