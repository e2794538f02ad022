#include "compress/cp_als.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>

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
#pragma omp parallel for if (rows * R > (1 << 16))
  for (int64_t j = 0; j < rows; ++j) {
    const float* mh = m + (j / head_dim) * R;
    for (int64_t r = 0; r < R; ++r) dst[j * R + r] = src[j * R + r] * mh[r];
  }
  return z;
}

// MTTKRP of the mixing mode: [H, R], entry (i, r) = w̃_Q,rᵀ T_i w̃_K,r =
// Σ_{j in head i} U[j, r] V[j, r] with U = W_Q W̃_Q, V = W_K W̃_K ([Dk, R]),
// summed in double (u, v: f32 or double, row-major [rows, R]).
template <class T>
Matrix mixing_mttkrp(const T* u, const T* v, int64_t rows, int64_t R, int64_t heads) {
  const int64_t head_dim = rows / heads;
  Matrix out(heads, R);
#pragma omp parallel for if (rows * R > (1 << 16))
  for (int64_t i = 0; i < heads; ++i) {
    double* o = out.row(i);
    for (int64_t j = i * head_dim; j < (i + 1) * head_dim; ++j)
      for (int64_t r = 0; r < R; ++r) o[r] += static_cast<double>(u[j * R + r]) * static_cast<double>(v[j * R + r]);
  }
  return out;
}
Matrix mixing_mttkrp(const Matrix& u, const Matrix& v, int64_t heads) {
  return mixing_mttkrp(u.v.data(), v.v.data(), u.rows, u.cols, heads);
}

// Relative error of [[λ; M, W̃_Q, W̃_K]] from the pieces, given the mixing
// mode's MTTKRP `inner` [H, R]:
// ‖T − T̂‖² = ‖T‖² − 2 Σ_r λ_r Σ_i m_ir inner_ir + λᵀ (G_Q ∘ G_K ∘ G_M) λ.
double error_from(double norm_sq, const Matrix& inner, const Matrix& mixing, const Matrix& gq, const Matrix& gk,
                  const Matrix& gm, const std::vector<double>& lambda) {
  const int64_t R = inner.cols;
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

// Scales the columns of the factor given its Gram to unit norm: the columns
// of every tensor in `fs` ([rows, R] each: the factor and any linear image of
// it) and both sides of the Gram, in place; the norms go to lambda. A zero
// column stays zero with λ = 0.
void normalise_columns(std::initializer_list<Tensor*> fs, Matrix& gram, std::vector<double>& lambda) {
  const int64_t R = gram.rows;
  std::vector<double> inv(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) {
    lambda[r] = std::sqrt(std::max(gram(r, r), 0.0));
    inv[r] = lambda[r] > 0 ? 1.0 / lambda[r] : 0.0;
  }
  for (Tensor* f : fs) {
    const int64_t rows = f->size(0);
    float* p = f->data<float>();
#pragma omp parallel for if (rows * R > (1 << 16))
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t r = 0; r < R; ++r) p[i * R + r] = static_cast<float>(p[i * R + r] * inv[r]);
  }
  for (int64_t r = 0; r < R; ++r)
    for (int64_t s = 0; s < R; ++s) gram(r, s) *= inv[r] * inv[s];
}
void normalise_columns(Tensor& f, Matrix& gram, std::vector<double>& lambda) {
  normalise_columns({&f}, gram, lambda);
}

// [R, R] product aᵀ b of two [rows, R] factors whose product is symmetric (a
// Gram: b = a, or b = P a with P symmetric), widened to double. In f32 by
// 2 × 2 blocks of columns, the upper three only (a quarter fewer flops), the
// lower block as the upper's transpose, the diagonal blocks made exactly
// symmetric (the f32 GEMM need not be).
Matrix gram_of(const Tensor& a, const Tensor& b) {
  const int64_t rows = a.size(0), R = a.size(1), h = R / 2;
  Tensor g = Tensor::empty({R, R});
  float* p = g.data<float>();
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  auto block = [&](int64_t r0, int64_t nr, int64_t c0, int64_t nc) {  // g[r0.., c0..] = a[:, r0..]ᵀ b[:, c0..]
    sgemm(true, false, nr, nc, rows, pa + r0, R, pb + c0, R, p + r0 * R + c0, R);
  };
  block(0, h, 0, h);
  block(0, h, h, R - h);
  block(h, R - h, h, R - h);
  Matrix m(R, R);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t s = r; s < R; ++s) {
      const bool diagonal_block = (r < h) == (s < h);
      const double v = diagonal_block ? 0.5 * (static_cast<double>(p[r * R + s]) + p[s * R + r]) : p[r * R + s];
      m(r, s) = v;
      m(s, r) = v;
    }
  return m;
}

// w wᵀ of a weight w [Dk, D]: [Dk, Dk] f32 (ALS's projection; see cp_als.h).
Tensor self_product(const Tensor& w) {
  const int64_t rows = w.size(0), cols = w.size(1);
  Tensor p = Tensor::empty({rows, rows});
  sgemm(false, true, rows, rows, cols, w.data<float>(), cols, w.data<float>(), cols, p.data<float>(), rows);
  return p;
}

// a · b of two row-major f32 tensors by sgemm, a optionally transposed (as stored: [k, m]).
Tensor product(const Tensor& a, bool trans_a, const Tensor& b) {
  const int64_t m = trans_a ? a.size(1) : a.size(0), k = trans_a ? a.size(0) : a.size(1), n = b.size(1);
  Tensor c = Tensor::empty({m, n});
  sgemm(trans_a, false, m, n, k, a.data<float>(), a.size(1), b.data<float>(), n, c.data<float>(), n);
  return c;
}

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Adds the time since the last lap to a slot.
class Stopwatch {
 public:
  void lap(double& slot) {
    const auto now = std::chrono::steady_clock::now();
    slot += seconds_between(last_, now);
    last_ = now;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

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

namespace {

// relative_error given Σ_i ‖T_i‖² (cp_als knows it).
double relative_error_of(const HeadProducts& x, const CpFactors& f, double norm_sq) {
  const int64_t D = x.dim(), R = f.rank();
  Matrix u, v;
  gemm_f64(x.query.data<float>(), D, 1, f.query.contiguous().data<float>(), R, x.key_dim(), D, R, u);
  gemm_f64(x.key.data<float>(), D, 1, f.key.contiguous().data<float>(), R, x.key_dim(), D, R, v);
  const Matrix m = to_matrix(f.mixing);
  Matrix gm(R, R);
  for (int64_t i = 0; i < m.rows; ++i)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t s = 0; s < R; ++s) gm(r, s) += m(i, r) * m(i, s);
  return error_from(norm_sq, mixing_mttkrp(u, v, m.rows), m, gram_f64(f.query.contiguous()),
                    gram_f64(f.key.contiguous()), gm, std::vector<double>(static_cast<size_t>(R), 1.0));
}

}  // namespace

double relative_error(const HeadProducts& x, const CpFactors& f) { return relative_error_of(x, f, tensor_norm_sq(x)); }

CpFactors concatenate_factors(const HeadProducts& x) {
  CpFactors f;
  f.query = x.query.transpose(0, 1).contiguous();  // [D, Dk]
  f.key = x.key.transpose(0, 1).contiguous();
  f.mixing = Tensor::zeros({x.heads, x.key_dim()});
  float* m = f.mixing.data<float>();
  for (int64_t j = 0; j < x.key_dim(); ++j) m[(j / x.head_dim()) * x.key_dim() + j] = 1.0f;
  return f;
}

CpSeconds& CpSeconds::operator+=(const CpSeconds& o) {
  mttkrp += o.mttkrp;
  solve += o.solve;
  factor_gemm += o.factor_gemm;
  project_gemm += o.project_gemm;
  gram_gemm += o.gram_gemm;
  normalise += o.normalise;
  error += o.error;
  return *this;
}

CpResult cp_als(const HeadProducts& x, const CpOptions& opt) {
  const int64_t D = x.dim(), H = x.heads, dk = x.head_dim(), R = opt.rank;
  const auto began = std::chrono::steady_clock::now();
  CMHA_CHECK(R > 0, "cp_als: the rank must be positive, got " + std::to_string(R));
  CMHA_CHECK(opt.max_iters > 0, "cp_als: max_iters must be positive");
  CMHA_CHECK(opt.init == "svd" || opt.init == "random",
             "cp_als: init '" + opt.init + "' is unknown; expected svd or random");
  Generator gen(opt.seed);
  Tensor A, B;  // W̃_Q, W̃_K: [D, R], the start
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
  Matrix gc;
  // A factor as ALS keeps it (cp_als.h): W̃ = Wᵀ Y diag(scale), its image
  // W W̃ = image diag(scale) with image = (W Wᵀ) Y, its Gram (unit diagonal).
  // The columns are normalised lazily: `scale` (1/λ) is folded into the
  // small [H, R] and [R, R] operands where Y and the image are read.
  struct Factor {
    Tensor y, image;  // [Dk, R]
    Matrix gram;      // [R, R]
    std::vector<double> scale;
  };
  auto start = [&](Tensor& w0, const Tensor& weight) {  // from a start W̃ [D, R]: Y unknown until the first update
    Factor f;
    f.gram = gram_of(w0, w0);
    normalise_columns(w0, f.gram, lambda);
    f.image = product(weight, false, w0);  // W W̃: [Dk, R]
    f.scale.assign(static_cast<size_t>(R), 1.0);
    return f;
  };
  Factor fa = start(A, x.query), fb = start(B, x.key);
  // The projections W_Q W_Qᵀ and W_K W_Kᵀ: [Dk, Dk], once.
  const Tensor pq = self_product(x.query), pk = self_product(x.key);
  // MTTKRP_M of the images: Σ_{j in head i} U[j, r] V[j, r] with the scales.
  auto mixing_of = [&] {
    Matrix m = mixing_mttkrp(fa.image.data<float>(), fb.image.data<float>(), x.key_dim(), R, H);
    for (int64_t i = 0; i < H; ++i)
      for (int64_t r = 0; r < R; ++r) m(i, r) *= fa.scale[r] * fb.scale[r];
    return m;
  };
  Matrix inner = mixing_of();  // also the first mixing step's right-hand side
  const double norm_sq = tensor_norm_sq(x);

  CpResult res;
  auto fold = [&] {  // W̃ = Wᵀ Y diag(scale), then λ^(1/3) into each factor
    CpFactors f{product(x.query, true, fa.y), product(x.key, true, fb.y), C.clone()};
    std::vector<double> root(static_cast<size_t>(R)), query(root.size()), key(root.size());
    for (int64_t r = 0; r < R; ++r) {
      root[r] = std::cbrt(lambda[r]);
      query[r] = fa.scale[r] * root[r];
      key[r] = fb.scale[r] * root[r];
    }
    const std::pair<Tensor*, const std::vector<double>*> parts[] = {
        {&f.query, &query}, {&f.key, &key}, {&f.mixing, &root}};
    for (const auto& [t, sc] : parts) {
      float* p = t->data<float>();
      for (int64_t i = 0; i < t->size(0); ++i)
        for (int64_t r = 0; r < R; ++r) p[i * R + r] = static_cast<float>(p[i * R + r] * (*sc)[r]);
    }
    return f;
  };
  // The Cholesky factor / inverse of a normal matrix, recording the largest ridge needed.
  auto factor = [&](const Matrix& normal) {
    double ridge = 0.0;
    Matrix f = spd_factor(normal, &ridge);
    res.ridge = std::max(res.ridge, ridge);
    return f;
  };
  auto inverse_factor = [&](const Matrix& normal) {
    double ridge = 0.0;
    Matrix m = spd_inverse_factor(normal, &ridge);
    res.ridge = std::max(res.ridge, ridge);
    return m;
  };
  CpSeconds& t = res.seconds;
  // One factor mode: Y ← Z · (G_M ∘ G_other)⁻¹ with Z the other image's rows
  // scaled by their head's mixing row (the MTTKRP before Wᵀ), image ← P · Y,
  // Gram ← Yᵀ · image; then the column norms into λ and scale.
  auto update = [&](const Factor& other, const Tensor& projection, Factor& f) {
    Stopwatch w;
    Tensor mixing = Tensor::empty({H, R});  // M · diag(other's scale)
    for (int64_t i = 0; i < H; ++i)
      for (int64_t r = 0; r < R; ++r)
        mixing.data<float>()[i * R + r] = static_cast<float>(C.data<float>()[i * R + r] * other.scale[r]);
    f.y = scale_head_rows(other.image, mixing, dk);  // Z: [Dk, R]
    w.lap(t.mttkrp);
    const Tensor m = to_tensor(inverse_factor(hadamard(gc, other.gram)));  // M Mᵀ = N⁻¹, M upper
    w.lap(t.solve);
    trmm_right_upper(m.data<float>(), R, false, f.y.data<float>(), x.key_dim());  // Y = Z M Mᵀ
    trmm_right_upper(m.data<float>(), R, true, f.y.data<float>(), x.key_dim());
    w.lap(t.factor_gemm);
    f.image = product(projection, false, f.y);
    w.lap(t.project_gemm);
    f.gram = gram_of(f.y, f.image);
    w.lap(t.gram_gemm);
    normalise_columns({}, f.gram, lambda);
    for (int64_t r = 0; r < R; ++r) f.scale[r] = lambda[r] > 0 ? 1.0 / lambda[r] : 0.0;
    w.lap(t.normalise);
  };
  for (int64_t it = 0; it < opt.max_iters; ++it) {
    // M ← MTTKRP_M (G_Q ∘ G_K)⁻¹: [H, R], small enough for double throughout.
    {
      Stopwatch w;
      Matrix m = inner;
      spd_solve_rows(factor(hadamard(fa.gram, fb.gram)), m);
      w.lap(t.solve);
      gc = Matrix(R, R);
      for (int64_t i = 0; i < H; ++i)
        for (int64_t r = 0; r < R; ++r) {
          const double a = m(i, r);
          double* g = gc.row(r);
          for (int64_t q = 0; q < R; ++q) g[q] += a * m(i, q);
        }
      w.lap(t.gram_gemm);
      C = to_tensor(m);
      normalise_columns(C, gc, lambda);
      w.lap(t.normalise);
    }
    update(fb, pq, fa);  // W̃_Q ← MTTKRP_Q (G_M ∘ G_K)⁻¹
    update(fa, pk, fb);  // W̃_K ← MTTKRP_K (G_M ∘ G_Q)⁻¹
    Stopwatch w;
    inner = mixing_of();  // also the next mixing step's right-hand side
    w.lap(t.mttkrp);
    double e = error_from(norm_sq, inner, to_matrix(C), fa.gram, fb.gram, gc, lambda);
    w.lap(t.error);
    // The pieces above carry f32 rounding (~1e-7 of ‖T‖²), which swamps the
    // squared error near exact recovery: there, recompute it in double.
    if (e < 1e-3) e = relative_error_of(x, fold(), norm_sq);
    res.errors.push_back(e);
    res.iterations = it + 1;
    const double prev = it > 0 ? res.errors[static_cast<size_t>(it - 1)] : INFINITY;
    if (e == 0.0 || std::abs(prev - e) < opt.tol * prev) break;
  }
  res.factors = fold();
  res.error = relative_error_of(x, res.factors, norm_sq);
  res.wall_seconds = seconds_between(began, std::chrono::steady_clock::now());
  return res;
}

std::vector<CpResult> cp_als_layers(const std::vector<HeadProducts>& layers, const CpOptions& opt) {
  const auto n = static_cast<int64_t>(layers.size());
  const int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t side_by_side = threads > 1 ? n / threads * threads : 0;  // whole rounds of one layer per thread
  std::vector<CpResult> out(layers.size());
  std::vector<std::exception_ptr> failed(layers.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(static_cast<int>(threads)) if (side_by_side > 0)
  for (int64_t l = 0; l < side_by_side; ++l) {
    try {
      out[static_cast<size_t>(l)] = cp_als(layers[static_cast<size_t>(l)], opt);
    } catch (...) {  // an exception must not leave the parallel region
      failed[static_cast<size_t>(l)] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
  for (int64_t l = side_by_side; l < n; ++l) out[static_cast<size_t>(l)] = cp_als(layers[static_cast<size_t>(l)], opt);
  return out;
}

}  // namespace cmha::compress
