#include "compress/cp_als.h"

#include <algorithm>
#include <cmath>

#include "backend/kernels.h"
#include "compress/dense_linalg.h"
#include "tensor/error.h"
#include "tensor/rng.h"

namespace cmha::compress {

namespace {

// a · b through the matmul kernel (a may be a transposed view).
Tensor mm(const Tensor& a, const Tensor& b) {
  const Device dev = common_device("cp_als matmul", {a, b});
  Tensor c = Tensor::empty({a.size(0), b.size(1)}, DType::f32, dev);
  CMHA_KERNEL(dev, matmul.matmul)(a, b, Tensor(), c);
  return c;
}

Matrix to_matrix(const Tensor& t) {
  Tensor c = t.contiguous();
  Matrix m(c.size(0), c.size(1));
  const float* p = c.data<float>();
  for (size_t i = 0; i < m.v.size(); ++i) m.v[i] = p[i];
  return m;
}

Tensor to_tensor(const Matrix& m) {
  Tensor t = Tensor::empty({m.rows, m.cols});
  float* p = t.data<float>();
  for (size_t i = 0; i < m.v.size(); ++i) p[i] = static_cast<float>(m.v[i]);
  return t;
}

// Row j of p [Dk, R] (head j / d_k) times that head's mixing row: the
// diag(m_i) of the MTTKRP applied to W_K^(i)ᵀ W̃_K (or W_Q^(i)ᵀ W̃_Q).
Tensor scale_head_rows(const Tensor& p, const Tensor& mixing, int64_t head_dim) {
  const int64_t rows = p.size(0), R = p.size(1);
  Tensor z = Tensor::empty({rows, R});
  const float* src = p.data<float>();
  const float* m = mixing.data<float>();
  float* dst = z.data<float>();
  for (int64_t j = 0; j < rows; ++j) {
    const float* mh = m + (j / head_dim) * R;
    for (int64_t r = 0; r < R; ++r) dst[j * R + r] = src[j * R + r] * mh[r];
  }
  return z;
}

// MTTKRP of the mixing mode: [H, R], entry (i, r) = w̃_Q,rᵀ T_i w̃_K,r =
// Σ_{j in head i} U[j, r] V[j, r] with U = W_Q W̃_Q, V = W_K W̃_K ([Dk, R]).
Matrix mixing_mttkrp(const Matrix& u, const Matrix& v, int64_t heads) {
  const int64_t R = u.cols, head_dim = u.rows / heads;
  Matrix out(heads, R);
  for (int64_t j = 0; j < u.rows; ++j)
    for (int64_t r = 0; r < R; ++r) out(j / head_dim, r) += u(j, r) * v(j, r);
  return out;
}

// Relative error of [[λ; M, W̃_Q, W̃_K]] from the pieces:
// ‖T − T̂‖² = ‖T‖² − 2 Σ_r λ_r Σ_i m_ir (mixing MTTKRP)_ir + λᵀ (G_Q ∘ G_K ∘ G_M) λ.
double error_from(double norm_sq, const Matrix& u, const Matrix& v, const Matrix& mixing, const Matrix& gq,
                  const Matrix& gk, const Matrix& gm, const std::vector<double>& lambda) {
  const int64_t R = u.cols;
  const Matrix inner = mixing_mttkrp(u, v, mixing.rows);
  double cross = 0.0, model = 0.0;
  for (int64_t i = 0; i < mixing.rows; ++i)
    for (int64_t r = 0; r < R; ++r) cross += lambda[r] * mixing(i, r) * inner(i, r);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t s = 0; s < R; ++s) model += lambda[r] * lambda[s] * gq(r, s) * gk(r, s) * gm(r, s);
  return std::sqrt(std::max(0.0, norm_sq - 2.0 * cross + model) / std::max(norm_sq, 1e-300));
}

Matrix hadamard(const Matrix& a, const Matrix& b) {
  Matrix c = a;
  for (size_t i = 0; i < c.v.size(); ++i) c.v[i] *= b.v[i];
  return c;
}

// Scales the columns of f [rows, R] to unit norm given its Gram (in place on
// both); the norms go to lambda. A zero column stays zero with λ = 0.
void normalise_columns(Tensor& f, Matrix& gram, std::vector<double>& lambda) {
  const int64_t rows = f.size(0), R = f.size(1);
  std::vector<double> inv(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) {
    lambda[r] = std::sqrt(std::max(gram(r, r), 0.0));
    inv[r] = lambda[r] > 0 ? 1.0 / lambda[r] : 0.0;
  }
  float* p = f.data<float>();
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t r = 0; r < R; ++r) p[i * R + r] = static_cast<float>(p[i * R + r] * inv[r]);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t s = 0; s < R; ++s) gram(r, s) *= inv[r] * inv[s];
}

Matrix gram(const Tensor& f) { return to_matrix(mm(f.transpose(0, 1), f)); }

// Exact Gram of f [rows, R] in double.
Matrix gram_f64(const Tensor& f) {
  const int64_t rows = f.size(0), R = f.size(1);
  Matrix g;
  gemm_f64(f.data<float>(), 1, R, f.data<float>(), R, R, rows, R, g);
  return g;
}

// Leading R eigenvectors of the unfolding's Gram (its left singular vectors).
// Columns beyond D are drawn from N(0, 1).
Tensor leading_singular_vectors(const Tensor& a, const Tensor& b, int64_t heads, int64_t R, Generator& gen) {
  const int64_t D = a.size(1);
  const SymmetricEigen e = symmetric_eigen(unfolding_gram(a, b, heads));
  Tensor out = Tensor::empty({D, R});
  normal_(out, gen);
  float* p = out.data<float>();
  for (int64_t d = 0; d < D; ++d)
    for (int64_t r = 0; r < std::min(R, D); ++r) p[d * R + r] = static_cast<float>(e.vectors(d, r));
  return out;
}

}  // namespace

Matrix unfolding_gram(const Tensor& a, const Tensor& b, int64_t heads) {
  const int64_t D = a.size(1), dk = a.size(0) / heads;
  Matrix g(D, D);
  for (int64_t i = 0; i < heads; ++i) {
    Tensor ai = a.narrow(0, i * dk, dk), bi = b.narrow(0, i * dk, dk);  // rows of head i: [dk, D]
    Tensor f = mm(ai.transpose(0, 1), mm(bi, bi.transpose(0, 1)));     // [D, dk]
    const Matrix gi = to_matrix(mm(f, ai));                              // [D, D]
    for (size_t k = 0; k < g.v.size(); ++k) g.v[k] += gi.v[k];
  }
  return g;
}

HeadProducts make_head_products(const Tensor& query_weight, const Tensor& key_weight, int64_t heads,
                                const std::string& what) {
  CMHA_CHECK(query_weight.dim() == 2 && key_weight.dim() == 2 && query_weight.shape() == key_weight.shape(),
             what + ": query and key weights must be two matrices of one shape, got " +
                 shape_str(query_weight.shape()) + " and " + shape_str(key_weight.shape()));
  CMHA_CHECK(heads > 0 && query_weight.size(0) % heads == 0,
             what + ": the key width " + std::to_string(query_weight.size(0)) + " is not divisible by " +
                 std::to_string(heads) + " heads");
  CMHA_CHECK(query_weight.dtype() == DType::f32 && key_weight.dtype() == DType::f32,
             what + ": query and key weights must be f32");
  return HeadProducts{query_weight.contiguous(), key_weight.contiguous(), heads};
}

Tensor mttkrp(const HeadProducts& x, const CpFactors& f, CpMode mode) {
  const int64_t dk = x.head_dim();
  switch (mode) {
    case CpMode::query:  // Σ_i W_Q^(i)ᵀ (W_K^(i) W̃_K) diag(m_i): [Dk, D]ᵀ · [Dk, R]
      return mm(x.query.transpose(0, 1), scale_head_rows(mm(x.key, f.key), f.mixing, dk));
    case CpMode::key:
      return mm(x.key.transpose(0, 1), scale_head_rows(mm(x.query, f.query), f.mixing, dk));
    case CpMode::mixing:
      return to_tensor(mixing_mttkrp(to_matrix(mm(x.query, f.query)), to_matrix(mm(x.key, f.key)), x.heads));
  }
  return Tensor();
}

double tensor_norm_sq(const HeadProducts& x) {
  // ‖W_Q^(i) W_K^(i)ᵀ‖² = Σ (W_Q^(i)ᵀ W_Q^(i)) ∘ (W_K^(i)ᵀ W_K^(i)), per head, [dk, dk] each.
  const int64_t D = x.dim(), dk = x.head_dim();
  const Tensor qt = x.query.transpose(0, 1).contiguous(), kt = x.key.transpose(0, 1).contiguous();  // [D, Dk]
  double total = 0.0;
  for (int64_t i = 0; i < x.heads; ++i) {
    Matrix gq, gk;
    const float* q = x.query.data<float>() + i * dk * D;
    const float* k = x.key.data<float>() + i * dk * D;
    gemm_f64(q, D, 1, qt.data<float>() + i * dk, x.key_dim(), dk, D, dk, gq);
    gemm_f64(k, D, 1, kt.data<float>() + i * dk, x.key_dim(), dk, D, dk, gk);
    for (size_t j = 0; j < gq.v.size(); ++j) total += gq.v[j] * gk.v[j];
  }
  return total;
}

double relative_error(const HeadProducts& x, const CpFactors& f) {
  const int64_t D = x.dim(), R = f.rank();
  Matrix u, v;
  gemm_f64(x.query.data<float>(), D, 1, f.query.contiguous().data<float>(), R, x.key_dim(), D, R, u);
  gemm_f64(x.key.data<float>(), D, 1, f.key.contiguous().data<float>(), R, x.key_dim(), D, R, v);
  const Matrix m = to_matrix(f.mixing);
  Matrix gm(R, R);
  for (int64_t i = 0; i < m.rows; ++i)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t s = 0; s < R; ++s) gm(r, s) += m(i, r) * m(i, s);
  return error_from(tensor_norm_sq(x), u, v, m, gram_f64(f.query.contiguous()), gram_f64(f.key.contiguous()), gm,
                    std::vector<double>(static_cast<size_t>(R), 1.0));
}

CpFactors concatenate_factors(const HeadProducts& x) {
  CpFactors f;
  f.query = x.query.transpose(0, 1).contiguous();  // [D, Dk]
  f.key = x.key.transpose(0, 1).contiguous();
  f.mixing = Tensor::zeros({x.heads, x.key_dim()});
  float* m = f.mixing.data<float>();
  for (int64_t j = 0; j < x.key_dim(); ++j) m[(j / x.head_dim()) * x.key_dim() + j] = 1.0f;
  return f;
}

CpResult cp_als(const HeadProducts& x, const CpOptions& opt) {
  const int64_t D = x.dim(), H = x.heads, dk = x.head_dim(), R = opt.rank;
  CMHA_CHECK(R > 0, "cp_als: the rank must be positive, got " + std::to_string(R));
  CMHA_CHECK(opt.max_iters > 0, "cp_als: max_iters must be positive");
  CMHA_CHECK(opt.init == "svd" || opt.init == "random",
             "cp_als: init '" + opt.init + "' is unknown; expected svd or random");
  Generator gen(opt.seed);
  Tensor A, B;  // W̃_Q, W̃_K: [D, R]
  if (opt.init == "svd") {
    A = leading_singular_vectors(x.query, x.key, H, R, gen);
    B = leading_singular_vectors(x.key, x.query, H, R, gen);
  } else {
    A = Tensor::empty({D, R});
    B = Tensor::empty({D, R});
    normal_(A, gen);
    normal_(B, gen);
  }
  Tensor C = Tensor::ones({H, R});  // M, solved for first: its start does not matter
  std::vector<double> lambda(static_cast<size_t>(R), 1.0);
  Matrix ga = gram(A), gb = gram(B), gc;
  normalise_columns(A, ga, lambda);
  normalise_columns(B, gb, lambda);
  Matrix u = to_matrix(mm(x.query, A)), v = to_matrix(mm(x.key, B));  // W_Q W̃_Q, W_K W̃_K: [Dk, R]
  const double norm_sq = tensor_norm_sq(x);

  CpResult res;
  auto fold = [&] {  // λ^(1/3) into each factor
    CpFactors f{A.clone(), B.clone(), C.clone()};
    for (Tensor* t : {&f.query, &f.key, &f.mixing}) {
      float* p = t->data<float>();
      for (int64_t i = 0; i < t->size(0); ++i)
        for (int64_t r = 0; r < R; ++r) p[i * R + r] = static_cast<float>(p[i * R + r] * std::cbrt(lambda[r]));
    }
    return f;
  };
  // normal⁻¹ (of one factor's normal equations), recording the largest ridge needed.
  auto inverse = [&](const Matrix& normal) {
    double ridge = 0.0;
    Matrix inv = spd_inverse(normal, &ridge);
    res.ridge = std::max(res.ridge, ridge);
    return inv;
  };
  for (int64_t it = 0; it < opt.max_iters; ++it) {
    // M ← MTTKRP_M (G_Q ∘ G_K)⁻¹: [H, R], small enough for double throughout.
    {
      const Matrix rhs = mixing_mttkrp(u, v, H), inv = inverse(hadamard(ga, gb));
      Matrix m(H, R);
      for (int64_t i = 0; i < H; ++i)
        for (int64_t k = 0; k < R; ++k) {
          const double a = rhs(i, k);
          for (int64_t r = 0; r < R; ++r) m(i, r) += a * inv(k, r);
        }
      gc = Matrix(R, R);
      for (int64_t i = 0; i < H; ++i)
        for (int64_t r = 0; r < R; ++r)
          for (int64_t s = 0; s < R; ++s) gc(r, s) += m(i, r) * m(i, s);
      C = to_tensor(m);
      normalise_columns(C, gc, lambda);
    }
    // W̃_Q ← MTTKRP_Q (G_M ∘ G_K)⁻¹, MTTKRP_Q = W_Qᵀ · rows-scaled(W_K W̃_K): [D, R]
    {
      const Tensor rhs = mm(x.query.transpose(0, 1), scale_head_rows(to_tensor(v), C, dk));
      A = mm(rhs, to_tensor(inverse(hadamard(gc, gb))));
      ga = gram(A);
      normalise_columns(A, ga, lambda);
      u = to_matrix(mm(x.query, A));
    }
    // W̃_K ← MTTKRP_K (G_M ∘ G_Q)⁻¹
    {
      const Tensor rhs = mm(x.key.transpose(0, 1), scale_head_rows(to_tensor(u), C, dk));
      B = mm(rhs, to_tensor(inverse(hadamard(gc, ga))));
      gb = gram(B);
      normalise_columns(B, gb, lambda);
      v = to_matrix(mm(x.key, B));
    }
    double e = error_from(norm_sq, u, v, to_matrix(C), ga, gb, gc, lambda);
    // The pieces above carry f32 rounding (~1e-7 of ‖T‖²), which swamps the
    // squared error near exact recovery: there, recompute it in double.
    if (e < 1e-3) e = relative_error(x, fold());
    res.errors.push_back(e);
    res.iterations = it + 1;
    const double prev = it > 0 ? res.errors[static_cast<size_t>(it - 1)] : INFINITY;
    if (e == 0.0 || std::abs(prev - e) < opt.tol * prev) break;
  }
  res.factors = fold();
  res.error = relative_error(x, res.factors);
  return res;
}

}  // namespace cmha::compress
