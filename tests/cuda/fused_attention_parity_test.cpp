// GPU parity of fused attention (backend/attention.h's fused_* entries:
// cuDNN's SDPA) against the CPU's unfused reference, forward and backward,
// for the three layouts the layers use (concat: Hq = Hk = Hv; grouped:
// Hk = Hv < Hq; collaborative: one key head, Hv = Hq), with no mask, key
// padding at the end of each row, and the causal mask; dropout 0. Then the
// layers themselves (concat, grouped, collaborative) under bf16 autocast on
// the GPU against the same layers on the CPU, and one statistical test of the
// fused kernel's dropout.
//
// Tolerances. The fused kernel reads bf16 operands and writes a bf16 output
// (8 significant bits: relative rounding up to 2^-9 per element), its softmax
// and products in f32. The reference runs in f32 on the very bf16 values the
// GPU reads, so the forward differs by the output's rounding and the
// probabilities' (cuDNN rounds P to bf16 before P·V, as flash attention
// does): normalised error ≲ 4 · (2^-9)² ≈ 1.5e-5, bounded by 1e-4. The
// gradients also go through bf16 dO, dS and P: 1e-3. The layer test adds the
// bf16 projections on both sides (autocast on the CPU too), so it is the same
// bound on the output and 2e-3 on the parameters' gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/kernels.h"
#include "cuda/parity.h"
#include "nn/attention/attention.h"
#include "tensor/device.h"
#ifdef CMHA_WITH_CUDNN
#include "backend/cuda/fused_attention.h"
#endif

using namespace cmha;
using namespace cmha::test;

namespace {

struct Problem {
  const char* name;
  int64_t B, Hq, Hk, Hv, Tq, Tk, Dqk, Dv;
};

const Problem kProblems[] = {
    {"concat", 3, 4, 4, 4, 17, 17, 64, 64},
    {"concat WMT", 8, 8, 8, 8, 31, 31, 64, 64},
    {"concat cross", 2, 4, 4, 4, 9, 23, 32, 64},
    {"grouped", 2, 8, 2, 2, 13, 13, 64, 64},
    {"collaborative", 2, 8, 1, 8, 19, 19, 136, 64},  // D̃k 128 + H 8
    {"collaborative DeiT", 2, 12, 1, 12, 197, 197, 208, 64},  // D̃k 192 + H 12, padded to 208
};

enum class Mask { none, key_padding, causal };
const char* mask_name(Mask m) { return m == Mask::none ? "no mask" : m == Mask::key_padding ? "key padding" : "causal"; }

// b8 [B, Tk]: row b pads its last (b · 5) % (Tk / 2) keys, so one row has none.
Tensor suffix_padding(int64_t B, int64_t Tk) {
  Tensor pad = Tensor::zeros({B, Tk}, DType::b8);
  bool* p = pad.data<bool>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = Tk / 2 > 0 ? (b * 5) % (Tk / 2) : 0;
    for (int64_t j = Tk - n; j < Tk; ++j) p[b * Tk + j] = true;
  }
  return pad;
}

// The CPU reference in f32: k and v repeated over the query heads they serve.
Tensor reference(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Mask mask, const Tensor& pad) {
  const int64_t B = q.size(0), Hq = q.size(1), Tq = q.size(2), Tk = k.size(2);
  auto repeat = [&](const Tensor& x) {  // [B, Hx, Tk, d] -> [B, Hq, Tk, d]
    const int64_t Hx = x.size(1), R = Hq / Hx;
    return x.unsqueeze(2).expand({B, Hx, R, Tk, x.size(3)}).reshape({B, Hq, Tk, x.size(3)});
  };
  Tensor s = mul_scalar(matmul(q, repeat(k).transpose(-1, -2)), scale);  // [B, Hq, Tq, Tk]
  const float neg_inf = -std::numeric_limits<float>::infinity();
  if (mask == Mask::key_padding) s = masked_fill(s, pad.view({B, 1, 1, Tk}), neg_inf);
  if (mask == Mask::causal) {
    Tensor future = Tensor::zeros({Tq, Tk}, DType::b8);
    bool* f = future.data<bool>();
    for (int64_t i = 0; i < Tq; ++i)
      for (int64_t j = i + 1; j < Tk; ++j) f[i * Tk + j] = true;
    s = masked_fill(s, future, neg_inf);
  }
  return matmul(softmax(s, -1), repeat(v));
}

// bf16 values (exactly representable) in f32, for both sides.
Tensor bf16_values(const Shape& shape, uint64_t seed, double scale = 1.0) {
  return mul_scalar(random_of(shape, DType::f32, seed), static_cast<float>(scale)).to(DType::bf16).to(DType::f32);
}

}  // namespace

PARITY_TEST(FusedAttentionMatchesTheCpuForwardAndBackward, "attention.fused_prepare", "attention.fused_forward",
            "attention.fused_backward") {
  if (cuda_emulated()) GTEST_SKIP() << "the emulated CUDA device runs the CPU's kernels: no fused attention";
  uint64_t seed = 900;
  for (const Problem& p : kProblems)
    for (Mask mask : {Mask::none, Mask::key_padding, Mask::causal}) {
      if (mask == Mask::causal && p.Tq != p.Tk) continue;
      const std::string what = std::string(p.name) + ", " + mask_name(mask);
      const float scale = 1.0f / std::sqrt(static_cast<float>(p.Dqk));
      Tensor q = bf16_values({p.B, p.Hq, p.Tq, p.Dqk}, ++seed, 2.0);
      Tensor k = bf16_values({p.B, p.Hk, p.Tk, p.Dqk}, ++seed, 2.0);
      Tensor v = bf16_values({p.B, p.Hv, p.Tk, p.Dv}, ++seed);
      Tensor g = bf16_values({p.B, p.Hq, p.Tq, p.Dv}, ++seed);
      const Tensor pad = suffix_padding(p.B, p.Tk);

      Tensor qc = q.detach().set_requires_grad(true), kc = k.detach().set_requires_grad(true),
             vc = v.detach().set_requires_grad(true);
      Tensor ref = reference(qc, kc, vc, scale, mask, pad);
      sum(mul(ref, g)).backward();

      // The GPU's operands in the layers' layout: [B, T, H, d] stored, seen as [B, H, T, d].
      auto heads_layout = [&](const Tensor& x) {
        return on_gpu(x.permute({0, 2, 1, 3}).to(DType::bf16)).permute({0, 2, 1, 3}).detach().set_requires_grad(true);
      };
      Tensor qg = heads_layout(q), kg = heads_layout(k), vg = heads_layout(v);
      FusedAttentionOptions o;
      o.scale = scale;
      o.causal = mask == Mask::causal;
      if (mask == Mask::key_padding) o.key_padding = on_gpu(pad);
      std::string reason;
      if (!fused_attention_supported(qg, kg, vg, o, reason)) {
        // A cuDNN without an engine for this shape (the collaborative widths
        // qk 136/208 against v 64, on an older cuDNN): the layers take cmha's
        // unfused path there, which the rest of the suite covers. Reported as
        // that shape's fallback; the plain shapes (qk == v) must run fused.
        ASSERT_NE(p.Dqk, p.Dv) << what << ": " << reason;
        std::printf("[ FALLBACK ] %s: unfused path (%s)\n", what.c_str(), reason.c_str());
        RecordProperty("fallback " + what, reason);
        continue;
      }
      Tensor out = fused_attention(qg, kg, vg, o);
      ASSERT_EQ(out.dtype(), DType::bf16) << what;
      EXPECT_TRUE(close_to_cpu(out.to(DType::f32), ref.detach(), 1e-4)) << what;
      sum(mul(out.to(DType::f32), on_gpu(g))).backward();
      EXPECT_TRUE(close_to_cpu(qg.grad().to(DType::f32), qc.grad(), 1e-3)) << what << " dq";
      EXPECT_TRUE(close_to_cpu(kg.grad().to(DType::f32), kc.grad(), 1e-3)) << what << " dk";
      EXPECT_TRUE(close_to_cpu(vg.grad().to(DType::f32), vc.grad(), 1e-3)) << what << " dv";
    }
}

#ifdef CMHA_WITH_CUDNN
PARITY_TEST(FusedAttentionBuildsEachGraphOnce, "attention.fused_prepare") {
  if (cuda_emulated()) GTEST_SKIP() << "the emulated CUDA device runs the CPU's kernels: no fused attention";
  Tensor q = on_gpu(random_of({2, 4, 24, 64}, DType::bf16, 1)), k = on_gpu(random_of({2, 4, 40, 64}, DType::bf16, 2)),
         v = on_gpu(random_of({2, 4, 40, 64}, DType::bf16, 3));
  FusedAttentionOptions o;
  o.scale = 0.125f;
  std::string reason;
  ASSERT_TRUE(fused_attention_supported(q, k, v, o, reason)) << reason;
  const size_t built = cuda::fused_attention_cache_stats().built;
  ASSERT_TRUE(fused_attention_supported(q, k, v, o, reason));
  (void)fused_attention(q, k, v, o);
  EXPECT_EQ(cuda::fused_attention_cache_stats().built, built);  // the same key: no new graph
  o.causal = true;
  ASSERT_TRUE(fused_attention_supported(q, k, v, o, reason)) << reason;
  EXPECT_EQ(cuda::fused_attention_cache_stats().built, built + 1);  // the mask shapes the graph
  // A head size cuDNN has no kernel for: unfused with a reason, never an error.
  Tensor q12 = on_gpu(random_of({2, 4, 24, 12}, DType::bf16, 4)), k12 = on_gpu(random_of({2, 4, 40, 12}, DType::bf16, 5));
  EXPECT_FALSE(fused_attention_supported(q12, k12, v, o, reason));
  EXPECT_FALSE(reason.empty());
}
#endif

namespace {

nn::AttentionConfig layer_config(const std::string& type) {
  nn::AttentionConfig c;
  c.type = type;
  c.heads = 8;
  c.key_dim = type == "collaborative" ? 128 : 512;
  c.kv_heads = 2;
  c.mixing_init = "normal";
  c.mixing_std = 0.2f;
  return c;
}

}  // namespace

PARITY_TEST(FusedAttentionLayersMatchTheCpuUnderAutocast, "attention.fused_forward", "attention.fused_backward") {
  const int64_t D = 512, B = 4, T = 23;
  for (const char* type : {"concat", "grouped", "collaborative"})
    for (Mask mask : {Mask::none, Mask::key_padding, Mask::causal}) {
      const std::string what = std::string(type) + ", " + mask_name(mask);
      Generator g1(7), g2(7);
      auto cpu_layer = nn::make_attention(layer_config(type), D, g1);
      auto gpu_layer = nn::make_attention(layer_config(type), D, g2);
      gpu_layer->set_place("parity");
      gpu_layer->to(gpu());
      cpu_layer->eval();
      gpu_layer->eval();
      const Tensor x = random_of({B, T, D}, DType::f32, 31);
      const Tensor dy = random_of({B, T, D}, DType::f32, 32);
      nn::AttentionMask m_cpu, m_gpu;
      m_cpu.causal = m_gpu.causal = mask == Mask::causal;
      if (mask == Mask::key_padding) {
        m_cpu.key_padding = suffix_padding(B, T);
        m_gpu.key_padding = on_gpu(m_cpu.key_padding);
      }
      autograd::AutocastGuard autocast(true);
      Tensor xc = x.detach().set_requires_grad(true), xg = on_gpu(x).set_requires_grad(true);
      Tensor yc = cpu_layer->forward(xc, xc, m_cpu);
      nn::reset_attention_paths();
      Tensor yg = gpu_layer->forward(xg, xg, m_gpu);
      const std::vector<nn::AttentionPathRecord> paths = nn::attention_paths();
      ASSERT_EQ(paths.size(), 1u) << what;
      // The emulated device takes the CPU's unfused path: its numbers are the CPU's, bit for bit.
      const bool emulated = cuda_emulated();
      if (emulated) {
        EXPECT_EQ(paths[0].unfused_calls, 1) << what;
        EXPECT_NE(paths[0].unfused_reason.find("emulated"), std::string::npos) << paths[0].unfused_reason;
      } else if (paths[0].fused_calls != 1) {
        // No cuDNN engine for the collaborative widths here: the shape's
        // fallback (the unfused path, compared below all the same), reported.
        ASSERT_EQ(std::string(type), "collaborative") << what << ": " << paths[0].unfused_reason;
        std::printf("[ FALLBACK ] %s: unfused path (%s)\n", what.c_str(), paths[0].unfused_reason.c_str());
        RecordProperty("fallback " + what, paths[0].unfused_reason);
      }
      auto matches = [&](const Tensor& gpu_value, const Tensor& cpu_value, double tolerance) {
        return emulated ? same_as_cpu(gpu_value, cpu_value) : close_to_cpu(gpu_value, cpu_value, tolerance);
      };
      EXPECT_TRUE(matches(yg, yc, 1e-4)) << what;
      sum(mul(yc, dy)).backward();
      sum(mul(yg, on_gpu(dy))).backward();
      EXPECT_TRUE(matches(xg.grad(), xc.grad(), 2e-3)) << what << " dx";
      const auto pc = cpu_layer->named_parameters(), pg = gpu_layer->named_parameters();
      for (size_t i = 0; i < pc.size(); ++i)
        if (pc[i].second.grad().defined())
          EXPECT_TRUE(matches(pg[i].second.grad(), pc[i].second.grad(), 2e-3)) << what << " " << pc[i].first;
    }
}

// Dropout inside the fused kernel: with q = k = 0 every weight is 1/Tk, and
// with V the identity (Tk = Dv) out[t, d] is keep(t, d) / ((1-p)·Tk): the
// fraction of non-zero outputs is the keep rate and each non-zero value shows
// the 1/(1-p) scaling. dV[j, :] with dO = 1 is Σ_t of the same dropped
// weights, so the backward must reproduce the forward's mask: it equals the
// column sums of out. The same seed and counter give the same output; the
// next counter another.
PARITY_TEST(FusedAttentionDropoutKeepsOneMinusPAndScales, "attention.fused_forward", "attention.fused_backward") {
  if (cuda_emulated()) GTEST_SKIP() << "the emulated CUDA device runs the CPU's kernels: no fused attention";
  const int64_t B = 4, H = 8, T = 64;
  const float p = 0.3f;
  Tensor zeros = Tensor::zeros({B, H, T, 64}, DType::bf16, gpu());
  Tensor eye = Tensor::zeros({T, T});
  for (int64_t j = 0; j < T; ++j) eye.data<float>()[j * T + j] = 1.0f;
  Tensor v = on_gpu(eye.view({1, 1, T, T}).expand({B, H, T, T}).contiguous().to(DType::bf16)).set_requires_grad(true);
  Tensor q = zeros.detach().set_requires_grad(true), k = zeros.detach().set_requires_grad(true);
  Generator gen(1234);
  FusedAttentionOptions o;
  o.scale = 1.0f;
  o.dropout = p;
  o.generator = &gen;
  std::string reason;
  ASSERT_TRUE(fused_attention_supported(q, k, v, o, reason)) << reason;
  Tensor out = fused_attention(q, k, v, o);
  const std::vector<float> values = out.to(DType::f32).to_float_vector();
  const double expected_value = 1.0 / ((1.0 - p) * T);
  int64_t kept = 0;
  for (float x : values) {
    if (x == 0.0f) continue;
    ++kept;
    ASSERT_NEAR(x, expected_value, expected_value * 1e-2);  // bf16 output: 2^-9 relative
  }
  const double n = static_cast<double>(values.size()), rate = static_cast<double>(kept) / n;
  // 131072 Bernoulli(0.7) draws: σ = √(p(1-p)/n) ≈ 0.0013; 6σ.
  EXPECT_NEAR(rate, 1.0 - p, 6 * std::sqrt(p * (1 - p) / n)) << kept << " of " << n;

  sum(out.to(DType::f32)).backward();
  // dv[b, h, j, d] = Σ_t dropped weight[t, j] = Σ_t out[b, h, t, j] (every d).
  Tensor col = sum(out.to(DType::f32), {2});                          // [B, H, T]
  Tensor dv0 = v.grad().to(DType::f32).select(3, 0).contiguous();     // [B, H, T]
  EXPECT_TRUE(close_to_cpu(on_cpu(dv0), on_cpu(col), 1e-4));

  Generator same(1234);
  o.generator = &same;
  Tensor again = fused_attention(q.detach(), k.detach(), v.detach(), o);
  EXPECT_TRUE(same_as_cpu(on_cpu(again), on_cpu(out.detach())));
  Tensor next = fused_attention(q.detach(), k.detach(), v.detach(), o);  // the generator moved on
  EXPECT_FALSE(same_as_cpu(on_cpu(next), on_cpu(out.detach())));
}
