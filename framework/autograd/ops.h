#pragma once
// The flat op API. Every op here is differentiable (recorded by autograd when
// an input requires grad), takes f32 unless stated, and runs on the CPU
// through oneDNN or OpenMP loops. Each op's forward and backward live side by
// side in the .cpp named in its section. Shapes: [..] any leading dims.
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace cmha {

// ---- matmul.cpp (oneDNN matmul, primitives cached by shape) ----
// a[..., M, K] @ b[..., K, N] -> [..., M, N]; batch dims broadcast; f32 or bf16
// inputs (both the same), f32 accumulation, result in the input dtype.
// Under bf16 autocast (engine.h) both run in bf16: f32 operands are cast (the
// casts are differentiable), and the result is bf16 unless `out` says f32
// (attention scores, which a softmax reads in f32).
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor matmul(const Tensor& a, const Tensor& b, DType out);
// x[..., in] · w[out, in]ᵀ + bias[out] -> [..., out]; the bias add is fused.
// Under bf16 autocast the GEMM reads bf16 copies of f32 x and w and writes bf16
// (the bias added in f32 first); dx comes back in x's dtype, dw and dbias f32.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor());

// ---- elementwise.cpp (broadcasting as in NumPy) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add_scalar(const Tensor& a, float s);
Tensor mul_scalar(const Tensor& a, float s);
Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor pow_scalar(const Tensor& a, float exponent);
Tensor tanh(const Tensor& a);
// Sums `x` over the dims that were broadcast to reach x's shape from `shape`.
Tensor sum_to(const Tensor& x, const Shape& shape);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator*(const Tensor& a, float s) { return mul_scalar(a, s); }
inline Tensor operator+(const Tensor& a, float s) { return add_scalar(a, s); }
inline Tensor operator-(const Tensor& a) { return neg(a); }

// ---- reduce.cpp ----
// sum and mean take f32 or bf16 and return f32 (a bf16 sum accumulates in f32).
Tensor sum(const Tensor& x);  // all elements -> []
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
// Maximum along `dim`; the gradient flows to the first maximal element.
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // i64, not differentiable

// ---- softmax.cpp ----
// f32 or bf16 in, the same out (or `out`: attention probabilities in bf16 from
// f32 scores); f32 arithmetic; the gradient comes back in x's dtype.
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor softmax(const Tensor& x, int64_t dim, DType out);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);

// ---- layer_norm.cpp ----
// Normalises over the last dim; weight/bias [D] are optional.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps = 1e-5f);

// ---- activation.cpp ----
Tensor relu(const Tensor& x);
// Exact (erf) GELU, or the tanh approximation.
Tensor gelu(const Tensor& x, bool tanh_approximation = false);

// ---- dropout.cpp ----
// Zeroes each element with probability p and scales the rest by 1/(1-p);
// the mask comes from the counter-based generator, so it is the same for a
// seed whatever the thread count. Identity when !training or p == 0.
Tensor dropout(const Tensor& x, float p, bool training, Generator& gen);

// ---- collaborative_queries.cpp ----
// Collaborative attention's per-head queries with the content-bias columns
// (backend/attention.h): q [B, Tq, D̃k], mixing [H, D̃k] ->
// [B, H, Tq, D̃k + H] = [scale · q ⊙ mixing_h, scale · e_h]. Differentiable
// in q and mixing; the e_h columns are constants.
Tensor collaborative_queries(const Tensor& q, const Tensor& mixing, float scale);

// ---- fused_attention.cpp ----
// Fused scaled-dot-product attention (the attention family's fused_* kernel
// entries: cuDNN's SDPA on CUDA; the CPU has none):
//   out[b, h] = dropout(softmax(scale · q[b, h] · k[b, h·Hk/Hq]ᵀ + masks)) · v[b, h·Hv/Hq]
// q [B, Hq, Tq, Dqk], k [B, Hk, Tk, Dqk], v [B, Hv, Tk, Dv], bf16 or f16 ->
// [B, Hq, Tq, Dv] in q's dtype (stored as [B, Tq, Hq, Dv]). Differentiable in
// q, k, v (the backward runs the fused backward pass from the forward's
// softmax statistics). Operands that are not dense views are copied first.
struct FusedAttentionOptions {
  float scale = 1.0f;
  bool causal = false;   // top-left: query t sees keys 0 .. t
  Tensor key_padding;    // b8 [B, Tk], true at padding; padding only at the end of each row
  float dropout = 0.0f;  // on the weights, cuDNN's Philox stream; seed and counters from `generator`
  Generator* generator = nullptr;
};
// Whether fused_attention can run these operands on their device (building
// and caching its graphs); `reason` says why, or why not, in one sentence.
bool fused_attention_supported(const Tensor& q, const Tensor& k, const Tensor& v, const FusedAttentionOptions& options,
                               std::string& reason);
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const FusedAttentionOptions& options);

// ---- embedding.cpp ----
// weight[V, D], ids (i32/i64)[...] -> [..., D]; backward scatter-adds into rows.
Tensor embedding(const Tensor& weight, const Tensor& ids);

// ---- loss.cpp ----
enum class Reduction { none, sum, mean };
// Cross-entropy with label smoothing, fused with log-softmax.
// logits [..., C] (classes LAST, unlike PyTorch for > 2 dims), target
// (i32/i64) [...]; targets equal to ignore_index contribute nothing; mean
// divides by the number of non-ignored targets, and is 0 (not NaN) when
// every target is ignored, so an all-padding batch cannot poison training.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, float label_smoothing = 0.0f,
                     int64_t ignore_index = -100, Reduction reduction = Reduction::mean);

// ---- linear_cross_entropy.cpp ----
// cross_entropy(linear(x, w), target, ...) without the [N, V] logits: the
// output projection and the loss run in chunks of rows, the gradient rows kept
// once in the GEMM's dtype (bf16 under autocast). x [N, D], w [V, D], target
// (i32/i64) [N]; reduction sum or mean. Also the argmax of each row's logits
// (i64 [N], not differentiable: the predictions for an accuracy count).
struct LinearCrossEntropy {
  Tensor loss;         // []
  Tensor predictions;  // i64 [N]
};
LinearCrossEntropy linear_cross_entropy(const Tensor& x, const Tensor& w, const Tensor& target,
                                        float label_smoothing = 0.0f, int64_t ignore_index = -100,
                                        Reduction reduction = Reduction::mean);

// ---- soft_cross_entropy.cpp ----
// Cross-entropy against soft targets [..., C] (class probabilities, such as
// mixup/CutMix labels) with label smoothing folded in as PyTorch does:
// targets become (1-ε)·target + ε/C. Mean divides by the number of rows.
// Differentiable in both the logits and the targets.
Tensor soft_cross_entropy(const Tensor& logits, const Tensor& target, float label_smoothing = 0.0f,
                          Reduction reduction = Reduction::mean);

// ---- index.cpp ----
// Where mask (b8, broadcastable to x) is true, the result holds `value`.
Tensor masked_fill(const Tensor& x, const Tensor& mask, float value);
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
// out[i][j][k] = x[i][index[i][j][k]][k] for dim 1 (as torch.gather).
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);

}  // namespace cmha
