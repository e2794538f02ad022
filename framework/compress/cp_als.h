#pragma once
// CP decomposition of the per-head query/key products of an attention layer
// (Cordonnier, Loukas & Jaggi 2020, section 3.3):
//   T_i = W_Q^(i) W_K^(i)ᵀ  (D × D, one slice per head i)
//       ≈ W̃_Q diag(m_i) W̃_Kᵀ  with W̃_Q, W̃_K: D × R shared, M: H × R.
// The tensor is never formed: every slice is a product of two thin D × d_k
// matrices, so each MTTKRP costs two GEMMs through W_Q and W_K, e.g.
//   MTTKRP_Q = Σ_i T_i W̃_K diag(m_i) = Σ_i W_Q^(i) (W_K^(i)ᵀ W̃_K) diag(m_i).
#include <cstdint>
#include <string>
#include <vector>

#include "compress/dense_linalg.h"
#include "tensor/tensor.h"

namespace cmha::compress {

// The tensor, by its factors, in nn::Linear's layout: query/key weight
// [H·d_k, D], head i in rows [i·d_k, (i+1)·d_k).
struct HeadProducts {
  Tensor query, key;  // f32 [Dk, D], contiguous
  int64_t heads = 0;
  int64_t dim() const { return query.size(1); }
  int64_t key_dim() const { return query.size(0); }
  int64_t head_dim() const { return key_dim() / heads; }
};
// Checks shapes; a mismatch is a cmha::Error naming `what`.
HeadProducts make_head_products(const Tensor& query_weight, const Tensor& key_weight, int64_t heads,
                                const std::string& what);

// [[M, W̃_Q, W̃_K]]: T_i ≈ query · diag(mixing[i]) · keyᵀ.
struct CpFactors {
  Tensor query, key;  // f32 [D, R]
  Tensor mixing;      // f32 [H, R]
  int64_t rank() const { return query.size(1); }
};

enum class CpMode { query, key, mixing };
// The MTTKRP of mode `mode` computed through the factors of the slices:
// query/key [D, R], mixing [H, R].
Tensor mttkrp(const HeadProducts& x, const CpFactors& f, CpMode mode);

// Σ_i ‖T_i‖² and ‖T − [[M, W̃_Q, W̃_K]]‖² / Σ_i ‖T_i‖², square-rooted, in double.
double tensor_norm_sq(const HeadProducts& x);
double relative_error(const HeadProducts& x, const CpFactors& f);

// Gram of the query-mode unfolding [T_1 … T_H] (D × H·D): Σ_i T_i T_iᵀ =
// Σ_i W_Q^(i) (W_K^(i)ᵀ W_K^(i)) W_Q^(i)ᵀ, [D, D]. With a and b swapped
// (key, query), the key mode's. Its eigenvectors are the unfolding's left
// singular vectors, its eigenvalues their energies.
Matrix unfolding_gram(const Tensor& a, const Tensor& b, int64_t heads);

// The exact factorisation of rank H·d_k: W̃_Q = W_Qᵀ, W̃_K = W_Kᵀ, M = blocks of
// ones (head i owns columns i·d_k .. (i+1)·d_k) — what concat attention is.
CpFactors concatenate_factors(const HeadProducts& x);

struct CpOptions {
  int64_t rank = 0;
  int64_t max_iters = 100;
  double tol = 1e-6;          // stop when |e_prev − e| < tol · e_prev (relative error e)
  // random: N(0, 1) entries. svd: leading singular vectors of the unfoldings,
  // from LAPACK's eigensolver of the two D × D unfolding Grams.
  std::string init = "random";
  uint64_t seed = 0;          // random init (and SVD's padding columns when R > D)
};
// Where one decomposition's time went, in seconds summed over its iterations
// (the start, the final fold and the double-precision final error excluded).
struct CpSeconds {
  double mttkrp = 0;      // row scalings of the MTTKRPs and the mixing mode's sums over heads
  double solve = 0;       // Hadamard products of Grams, Cholesky, inverse / solve of the R × R normal equations
  double factor_gemm = 0; // MTTKRP · (normal matrix)⁻¹ = Z M Mᵀ: [Dk, R] · two triangular [R, R]
  double project_gemm = 0;  // W_Q W_Qᵀ · W̃: [Dk, Dk] · [Dk, R]
  double gram_gemm = 0;   // the factors' Grams: [R, Dk] · [Dk, R]
  double normalise = 0;   // column norms into λ
  double error = 0;       // the relative error from the pieces
  double total() const { return mttkrp + solve + factor_gemm + project_gemm + gram_gemm + normalise + error; }
  CpSeconds& operator+=(const CpSeconds& o);
};
struct CpResult {
  CpFactors factors;
  std::vector<double> errors;  // relative error after each iteration
  double error = 0.0;          // final relative error, recomputed from the factors in double
  int64_t iterations = 0;
  double ridge = 0.0;          // largest ridge a normal-equation solve needed (0 = none)
  CpSeconds seconds;           // where the iterations' time went
  double wall_seconds = 0.0;   // the whole decomposition, start to fold (on its thread)
};
// Alternating least squares: mixing, then query, then key, each from its
// normal equations (Hadamard products of the other factors' Grams, the Cholesky
// inverse with a ridge fallback); columns normalised after each step, the
// weights folded back at the end, split evenly over the three factors (their
// cube root each) so no factor's scale dwarfs another's when fine-tuned.
// Deterministic for a given seed and thread count.
//
// The query factor enters the iterations only through U = W_Q W̃_Q and its
// Gram W̃_Qᵀ W̃_Q, and its update is W̃_Q = W_Qᵀ Z N⁻¹ (Z the row-scaled
// W_K W̃_K, N the normal matrix): so ALS keeps Ỹ = Z N⁻¹ [Dk, R] instead,
// with U = (W_Q W_Qᵀ) Ỹ and Gram Ỹᵀ U, W_Q W_Qᵀ [Dk, Dk] formed once; W̃_Q
// = W_Qᵀ Ỹ only at the end. Three f32 products per mode instead of four
// GEMMs (a third fewer flops when Dk = D; N⁻¹ is applied as two triangular
// products). Likewise the key factor.
CpResult cp_als(const HeadProducts& x, const CpOptions& opt);

// cp_als of independent layers, in order. With at least as many layers as
// OpenMP threads, whole layers run side by side, one thread each (BLAS and
// LAPACK then run single-threaded inside them): no serial section leaves a
// core idle, where one layer's R × R factorisations, row scalings and small
// GEMMs scale poorly over two threads. Layers left over (fewer than the
// threads) run one at a time on all threads. A layer's result depends only on
// its inputs and on the thread count it ran with.
std::vector<CpResult> cp_als_layers(const std::vector<HeadProducts>& layers, const CpOptions& opt);

}  // namespace cmha::compress
