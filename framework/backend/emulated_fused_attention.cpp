// The emulated CUDA device's stand-in for cuDNN's fused attention
// (backend/attention.h's fused_* entries): plain f32 arithmetic on the CPU,
// with cuDNN's contract where it matters to the caller, above all that the
// backward pass leaves the rows of padding keys in dK and dV UNWRITTEN. On
// the asynchronous emulator a fresh block holds NaN poison, so a caller that
// relies on those rows being zero fails on every machine, as it would on a
// GPU only with recycled memory. The layers still take cmha's unfused path
// on the emulated device (its numbers are the CPU's, bit for bit); the
// stand-in serves autograd's fused_attention called directly (tests).
#include "backend/emulated_fused_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/error.h"

namespace cmha::backend {
namespace {

float load(const Tensor& t, int64_t at) {
  const char* base = static_cast<const char*>(t.raw_data());
  switch (t.dtype()) {
    case DType::f32: return reinterpret_cast<const float*>(base)[at];
    case DType::bf16: return bf16_to_float(reinterpret_cast<const bf16*>(base)[at]);
    case DType::f16: return f16_to_float(reinterpret_cast<const f16*>(base)[at]);
    default: throw Error("fused attention stand-in: unsupported dtype " + t.describe());
  }
}

void store(const Tensor& t, int64_t at, float v) {
  char* base = static_cast<char*>(t.raw_data());
  switch (t.dtype()) {
    case DType::f32: reinterpret_cast<float*>(base)[at] = v; return;
    case DType::bf16: reinterpret_cast<bf16*>(base)[at] = float_to_bf16(v); return;
    case DType::f16: reinterpret_cast<f16*>(base)[at] = float_to_f16(v); return;
    default: throw Error("fused attention stand-in: unsupported dtype " + t.describe());
  }
}

// Element offset of [b, h, t, d] in a 4-d view.
int64_t at(const Tensor& x, int64_t b, int64_t h, int64_t t, int64_t d) {
  const auto& s = x.strides();
  return b * s[0] + h * s[1] + t * s[2] + d * s[3];
}

// Keys of row b that are not padding: the index of its first padding key.
int64_t key_length(const FusedAttentionArgs& a, int64_t b, int64_t Tk) {
  if (!a.key_padding.defined()) return Tk;
  const auto* pad = static_cast<const uint8_t*>(a.key_padding.raw_data());
  const auto& s = a.key_padding.strides();
  for (int64_t j = 0; j < Tk; ++j)
    if (pad[b * s[0] + j * s[1]]) return j;
  return Tk;
}

// Visits every (b, h, t) query row with its softmax weights p[0 .. len) over
// the visible keys (the rest 0) and their key/value heads.
template <typename F>
void for_each_row(const FusedAttentionArgs& a, const Tensor& stats, F&& f) {
  const int64_t B = a.q.size(0), H = a.q.size(1), Tq = a.q.size(2), D = a.q.size(3), Tk = a.k.size(2);
  const int64_t per_k = H / a.k.size(1), per_v = H / a.v.size(1);
  std::vector<float> p(static_cast<size_t>(Tk));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = key_length(a, b, Tk);
    for (int64_t h = 0; h < H; ++h) {
      const int64_t hk = h / per_k, hv = h / per_v;
      for (int64_t t = 0; t < Tq; ++t) {
        const int64_t visible = a.causal ? std::min(len, t + 1) : len;
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < visible; ++j) {
          float s = 0;
          for (int64_t d = 0; d < D; ++d) s += load(a.q, at(a.q, b, h, t, d)) * load(a.k, at(a.k, b, hk, j, d));
          p[static_cast<size_t>(j)] = s * a.scale;
          m = std::max(m, p[static_cast<size_t>(j)]);
        }
        float l = 0;
        for (int64_t j = 0; j < visible; ++j) l += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - m));
        for (int64_t j = 0; j < visible; ++j) p[static_cast<size_t>(j)] /= l;
        if (stats.defined()) static_cast<float*>(stats.raw_data())[(b * H + h) * Tq + t] = m + std::log(l);
        f(b, h, t, hk, hv, visible, len, p);
      }
    }
  }
}

bool prepare(const FusedAttentionArgs& a, std::string& reason) {
  if (a.dropout > 0) {
    reason = "emulated CUDA device: the fused-attention stand-in has no dropout";
    return false;
  }
  reason = "emulated CUDA device: the fused-attention stand-in (cuDNN's contract, f32 arithmetic)";
  return true;
}

void forward(const FusedAttentionArgs& a, const Tensor& out, const Tensor& stats, uint64_t, uint64_t) {
  const int64_t Dv = a.v.size(3);
  for_each_row(a, stats, [&](int64_t b, int64_t h, int64_t t, int64_t, int64_t hv, int64_t visible, int64_t,
                             const std::vector<float>& p) {
    for (int64_t d = 0; d < Dv; ++d) {
      float o = 0;
      for (int64_t j = 0; j < visible; ++j) o += p[static_cast<size_t>(j)] * load(a.v, at(a.v, b, hv, j, d));
      store(out, at(out, b, h, t, d), o);
    }
  });
}

void backward(const FusedAttentionArgs& a, const Tensor& out, const Tensor&, const Tensor& d_out, const Tensor& dq,
              const Tensor& dk, const Tensor& dv, uint64_t, uint64_t) {
  const int64_t B = a.q.size(0), D = a.q.size(3), Dv = a.v.size(3), Tk = a.k.size(2);
  // f32 accumulators, [b][head][key][d]; written back below, padding rows left alone.
  const int64_t Hk = a.k.size(1), Hv = a.v.size(1);
  std::vector<float> gk(static_cast<size_t>(B * Hk * Tk * D), 0.0f), gv(static_cast<size_t>(B * Hv * Tk * Dv), 0.0f);
  std::vector<float> dp(static_cast<size_t>(Tk));
  for_each_row(a, Tensor(), [&](int64_t b, int64_t h, int64_t t, int64_t hk, int64_t hv, int64_t visible, int64_t,
                                const std::vector<float>& p) {
    float delta = 0;  // Σ_d dO·O
    for (int64_t d = 0; d < Dv; ++d) delta += load(d_out, at(d_out, b, h, t, d)) * load(out, at(out, b, h, t, d));
    for (int64_t j = 0; j < visible; ++j) {
      float g = 0;
      for (int64_t d = 0; d < Dv; ++d) {
        const float go = load(d_out, at(d_out, b, h, t, d));
        g += go * load(a.v, at(a.v, b, hv, j, d));
        gv[static_cast<size_t>(((b * Hv + hv) * Tk + j) * Dv + d)] += p[static_cast<size_t>(j)] * go;
      }
      dp[static_cast<size_t>(j)] = p[static_cast<size_t>(j)] * (g - delta) * a.scale;  // d score
    }
    for (int64_t d = 0; d < D; ++d) {
      float gq = 0;
      for (int64_t j = 0; j < visible; ++j) {
        gq += dp[static_cast<size_t>(j)] * load(a.k, at(a.k, b, hk, j, d));
        gk[static_cast<size_t>(((b * Hk + hk) * Tk + j) * D + d)] += dp[static_cast<size_t>(j)] * load(a.q, at(a.q, b, h, t, d));
      }
      store(dq, at(dq, b, h, t, d), gq);
    }
  });
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = key_length(a, b, Tk);  // rows len.. of dK and dV stay unwritten, as cuDNN leaves them
    for (int64_t j = 0; j < len; ++j) {
      for (int64_t h = 0; h < Hk; ++h)
        for (int64_t d = 0; d < D; ++d) store(dk, at(dk, b, h, j, d), gk[static_cast<size_t>(((b * Hk + h) * Tk + j) * D + d)]);
      for (int64_t h = 0; h < Hv; ++h)
        for (int64_t d = 0; d < Dv; ++d)
          store(dv, at(dv, b, h, j, d), gv[static_cast<size_t>(((b * Hv + h) * Tk + j) * Dv + d)]);
    }
  }
}

}  // namespace

void use_emulated_fused_attention(AttentionKernels& k) {
  k.fused_prepare = prepare;
  k.fused_forward = forward;
  k.fused_backward = backward;
}

}  // namespace cmha::backend
