// CPU kernels: layer_norm (entries of backend/layer_norm.h), over the last dim.
// Forward, per row of D values: mean μ and rstd = 1/√(var + eps), two-pass
// in double (no cancellation when |μ| ≫ σ), then y = (x - μ)·rstd·w + b.
// μ and rstd are saved per row for the backward pass.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/element.h"
#include "backend/cpu/kernel_table.h"
#include "backend/cpu/parallel.h"

namespace cmha::cpu {

namespace {

// dweight/dbias are summed over rows in this many fixed row ranges, then the
// range sums are added in order: the result does not depend on the thread count.
constexpr int64_t kChunks = 64;

template <bool kWeight, bool kBias, typename X, typename Y>
void forward(const X* x, const float* w, const float* b, Y* y, float* mean, float* rstd, int64_t rows, int64_t d,
             float eps) {
#pragma omp parallel for schedule(static) if (rows > 1 && rows * d >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const X* xr = x + r * d;
    Y* yr = y + r * d;
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < d; ++j) sum += ld(xr[j]);
    const float mu = static_cast<float>(sum / static_cast<double>(d));
    double sq = 0.0;
#pragma omp simd reduction(+ : sq)
    for (int64_t j = 0; j < d; ++j) {
      const double dev = ld(xr[j]) - mu;
      sq += dev * dev;
    }
    const float rs = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(d) + eps));
    mean[r] = mu;
    rstd[r] = rs;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) {
      float v = (ld(xr[j]) - mu) * rs;
      if constexpr (kWeight) v *= w[j];
      if constexpr (kBias) v += b[j];
      st(yr[j], v);
    }
  }
}

// With x̂ = (x - μ)·rstd and ĝ = g·w:
//   dx = rstd · (ĝ - mean(ĝ) - x̂ · mean(ĝ·x̂))
//   dweight = Σ_rows g·x̂,  dbias = Σ_rows g
// Rows are split into fixed chunks; each chunk sums its rows' g·x̂ and g
// while computing dx: in f32 over blocks of kBlockRows rows (cheap, and
// short enough to stay accurate), each block then added into the chunk's
// slice of `partial` ([chunks, 2, D], double).
template <bool kWeight, bool kDx, bool kAffine, typename X, typename G, typename DX>
void backward(const X* x, const float* w, const G* g, const float* mean, const float* rstd, DX* dx, double* partial,
              int64_t rows, int64_t d) {
  constexpr int64_t kBlockRows = 32;
  const int64_t chunks = std::min(rows, kChunks);
#pragma omp parallel for schedule(static) if (chunks > 1 && rows * d >= kParallelMin)
  for (int64_t c = 0; c < chunks; ++c) {
    std::vector<float> block(kAffine ? 2 * d : 0, 0.0f);  // [2, D]: Σ g·x̂, Σ g over the block
    float* bw = block.data();
    float* bb = bw + d;
    const int64_t r0 = rows * c / chunks, r1 = rows * (c + 1) / chunks;
    for (int64_t r = r0; r < r1; ++r) {
      const X* xr = x + r * d;
      const G* gr = g + r * d;
      const float mu = mean[r], rs = rstd[r];
      float mean_g = 0.0f, mean_gx = 0.0f;
      if constexpr (kDx) {
        float sg = 0.0f, sgx = 0.0f;
#pragma omp simd reduction(+ : sg, sgx)
        for (int64_t j = 0; j < d; ++j) {
          const float gh = kWeight ? ld(gr[j]) * w[j] : ld(gr[j]);
          sg += gh;
          sgx += gh * ((ld(xr[j]) - mu) * rs);
        }
        mean_g = sg / static_cast<float>(d);
        mean_gx = sgx / static_cast<float>(d);
      }
      // Two loops, not one: the dx stores miss the cache, and sharing the
      // store buffer with the block sums' stores stalls both.
      if constexpr (kDx) {
        DX* dr = dx + r * d;
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) {
          const float xh = (ld(xr[j]) - mu) * rs;
          const float gh = kWeight ? ld(gr[j]) * w[j] : ld(gr[j]);
          st(dr[j], rs * (gh - mean_g - xh * mean_gx));
        }
      }
      if constexpr (kAffine) {
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) {
          bw[j] += ld(gr[j]) * ((ld(xr[j]) - mu) * rs);
          bb[j] += ld(gr[j]);
        }
      }
      if (kAffine && ((r - r0 + 1) % kBlockRows == 0 || r + 1 == r1)) {
        double* pc = partial + c * 2 * d;
#pragma omp simd
        for (int64_t j = 0; j < 2 * d; ++j) {
          pc[j] += bw[j];
          bw[j] = 0.0f;
        }
      }
    }
  }
}

template <bool kWeight, typename X, typename G, typename DX>
void backward_dispatch(bool need_dx, bool need_affine, const X* x, const float* w, const G* g, const float* mean,
                       const float* rstd, DX* dx, double* partial, int64_t rows, int64_t d) {
  if (need_dx && need_affine) backward<kWeight, true, true>(x, w, g, mean, rstd, dx, partial, rows, d);
  else if (need_dx) backward<kWeight, true, false>(x, w, g, mean, rstd, dx, partial, rows, d);
  else if (need_affine) backward<kWeight, false, true>(x, w, g, mean, rstd, dx, partial, rows, d);
}

void forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out, const Tensor& mean,
             const Tensor& rstd, float eps) {
  const int64_t d = x.shape().back(), rows = mean.numel();
  const float* w = weight.defined() ? weight.data<float>() : nullptr;
  const float* b = bias.defined() ? bias.data<float>() : nullptr;
  with_float_types(x, out, "layer_norm", [&](auto tx, auto ty) {
    using X = decltype(tx);
    using Y = decltype(ty);
    const X* px = x.data<X>("layer_norm");
    Y* py = out.data<Y>("layer_norm");
    float *pm = mean.data<float>(), *pr = rstd.data<float>();
    if (w && b) forward<true, true>(px, w, b, py, pm, pr, rows, d, eps);
    else if (w) forward<true, false>(px, w, b, py, pm, pr, rows, d, eps);
    else if (b) forward<false, true>(px, w, b, py, pm, pr, rows, d, eps);
    else forward<false, false>(px, w, b, py, pm, pr, rows, d, eps);
  });
}

void backward(const Tensor& x, const Tensor& weight, const Tensor& g, const Tensor& mean_t, const Tensor& rstd_t,
              const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const int64_t d = x.shape().back(), rows = mean_t.numel();
  const bool need_dx = dx.defined();
  const bool need_affine = dweight.defined() || dbias.defined();
  const int64_t chunks = std::min(rows, kChunks);
  std::vector<double> partial(need_affine ? chunks * 2 * d : 0, 0.0);
  const float* w = weight.defined() ? weight.data<float>() : nullptr;
  // dx takes its own dtype (x's when not wanted: the loop never writes it).
  const Tensor& dx_type = need_dx ? dx : x;
  with_float_types(x, g, dx_type, "layer_norm backward", [&](auto tx, auto tg, auto td) {
    using X = decltype(tx);
    using G = decltype(tg);
    using DX = decltype(td);
    const X* px = x.data<X>("layer_norm backward");
    const G* pg = g.data<G>("layer_norm backward");
    DX* pdx = need_dx ? dx.data<DX>("layer_norm backward") : nullptr;
    const float *pm = mean_t.data<float>(), *pr = rstd_t.data<float>();
    if (w) backward_dispatch<true>(need_dx, need_affine, px, w, pg, pm, pr, pdx, partial.data(), rows, d);
    else backward_dispatch<false>(need_dx, need_affine, px, w, pg, pm, pr, pdx, partial.data(), rows, d);
  });
  if (!need_affine) return;

  // [chunks, 2, D] -> [2, D], adding the chunks in order.
  std::vector<double> total(2 * d, 0.0);
  for (int64_t c = 0; c < chunks; ++c) {
    const double* part = partial.data() + c * 2 * d;
#pragma omp simd
    for (int64_t j = 0; j < 2 * d; ++j) total[j] += part[j];
  }
  float* pw = dweight.defined() ? dweight.data<float>() : nullptr;
  float* pb = dbias.defined() ? dbias.data<float>() : nullptr;
  for (int64_t j = 0; j < d; ++j) {
    if (pw) pw[j] = static_cast<float>(total[j]);
    if (pb) pb[j] = static_cast<float>(total[d + j]);
  }
}

}  // namespace

backend::LayerNormKernels layer_norm_kernels() {
  backend::LayerNormKernels k;
  k.forward = forward;
  k.backward = backward;
  return k;
}

}  // namespace cmha::cpu
