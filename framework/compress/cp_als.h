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
struct CpResult {
  CpFactors factors;
  std::vector<double> errors;  // relative error after each iteration
  double error = 0.0;          // final relative error, recomputed from the factors in double
  int64_t iterations = 0;
  double ridge = 0.0;          // largest ridge a normal-equation solve needed (0 = none)
};
// Alternating least squares: mixing, then query, then key, each from its
// normal equations (Hadamard products of the other factors' Grams, the Cholesky
// inverse with a ridge fallback); columns normalised after each step, the
// weights folded back at the end, split evenly over the three factors (their
// cube root each) so no factor's scale dwarfs another's when fine-tuned.
// Deterministic for a given seed and thread count.
CpResult cp_als(const HeadProducts& x, const CpOptions& opt);

}  // namespace cmha::compress
