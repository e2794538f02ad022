#pragma once
// Double-precision linear algebra on the small dense matrices of CP-ALS and
// of the head analysis (rank × rank normal equations, D × D Gram matrices),
// on LAPACK and BLAS: Debian's LAPACKE (the C interface) over OpenBLAS's
// optimised, OpenMP-threaded LAPACK and BLAS (libopenblas-openmp-dev; its
// OpenMP build shares libgomp's threads with oneDNN rather than starting a
// second pool that would fight it for the cores). Everything is in double:
// the errors near exact recovery are below f32's rounding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cmha::compress {

// Row-major rows × cols matrix of doubles.
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<double> v;
  Matrix() = default;
  Matrix(int64_t r, int64_t c) : rows(r), cols(c), v(static_cast<size_t>(r * c), 0.0) {}
  double& operator()(int64_t i, int64_t j) { return v[static_cast<size_t>(i * cols + j)]; }
  double operator()(int64_t i, int64_t j) const { return v[static_cast<size_t>(i * cols + j)]; }
  double* row(int64_t i) { return v.data() + i * cols; }
  const double* row(int64_t i) const { return v.data() + i * cols; }
};

// Lower-triangular L with L Lᵀ = a (a symmetric; only its upper triangle is
// read), by LAPACK's dpotrf. False when a is not positive definite or not finite.
bool cholesky(const Matrix& a, Matrix& lower);

// Inverse of a symmetric positive semi-definite matrix, by LAPACK's Cholesky
// (dpotrf), the triangular factor's inverse (a recursive one over dtrmm) and
// LAPACK's dlauum (dpotri's second half): ALS then multiplies its right-hand
// sides [D, R] by it in one f32 GEMM, four times fewer double flops than
// triangular solves of D right-hand sides would take (cp_als_bench: those
// solves were 40 % of an iteration). A singular or indefinite a gets a ridge
// λ·I added, λ growing from 1e-12 of the mean diagonal by factors of 100
// until the factorisation succeeds; *ridge reports the λ used (0 when none
// was needed). NaN or infinity in a is a cmha::Error.
Matrix spd_inverse(const Matrix& a, double* ridge = nullptr);

// The Cholesky factor of a symmetric positive semi-definite matrix with the
// same ridge fallback as spd_inverse (*ridge: the λ used), in LAPACK's layout
// (only the row-major upper triangle, Lᵀ, is meaningful): the input of spd_solve_rows.
Matrix spd_factor(const Matrix& a, double* ridge = nullptr);
// rhs ← rhs · a⁻¹ for every row of rhs [n, a.rows], given a's spd_factor (dpotrs).
void spd_solve_rows(const Matrix& factor, Matrix& rhs);

// The inverse's factor: upper-triangular M with M Mᵀ = a⁻¹ (M = L⁻ᵀ for the
// Cholesky factor L of a; the lower triangle zero), same ridge fallback. ALS
// applies a⁻¹ to [Dk, R] right-hand sides as two f32 triangular products
// (trmm_right_upper), cheaper than dlauum's a⁻¹ and a GEMM.
Matrix spd_inverse_factor(const Matrix& a, double* ridge = nullptr);
// x ← x · m (or x · mᵀ when trans) in place for row-major f32 x [rows, n] and
// upper-triangular m [n, n] (OpenBLAS's strmm).
void trmm_right_upper(const float* m, int64_t n, bool trans, float* x, int64_t rows);

// The OpenBLAS this process loaded (its configuration, the core its kernels
// were picked for, and which of Debian's builds: OpenMP, pthreads or serial),
// for benchmarks to print. Under the pthreads or serial build every call of
// this file runs on its caller's thread (dense_linalg.cpp says why).
std::string blas_description();

// The R × R LAPACK calls above (spd_*, cholesky) run on one thread: dpotrf of
// 384 × 384 takes 0.9 ms on one thread or two, and its many small parallel
// regions cost 10× that under OMP_WAIT_POLICY=passive (dpotrf + dpotri: 2.1 ms
// on 2 threads, 31 ms passive; 2.9 ms on one thread either way).

// c[m, n] = op(a) · op(b) (+ beta · c) in f32, row-major, by oneDNN's
// dnnl_sgemm (op = transpose when the flag says so; lda/ldb/ldc: the row
// strides as stored): 8 % faster than OpenBLAS's at CP-ALS's [768, 768] · [768, 384]
// on one thread, and single-threaded inside an OpenMP parallel region.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
           int64_t ldb, float* c, int64_t ldc, float beta = 0.0f);

// Eigen-decomposition of a symmetric matrix (LAPACK's divide-and-conquer
// dsyevd): eigenvalues in descending order, and (when asked) the matching
// unit eigenvectors as the columns of `vectors`.
struct SymmetricEigen {
  std::vector<double> values;
  Matrix vectors;
};
SymmetricEigen symmetric_eigen(const Matrix& a, bool with_vectors = true);

// c[m, n] = a[m, k] · b[k, n] with every product and sum in double. a is read
// through strides (a[i, p] = a[i·row_stride + p·col_stride], so a transposed
// operand needs no copy); b has unit column stride (b[p, j] = b[p·b_row_stride + j]).
void gemm_f64(const float* a, int64_t a_row_stride, int64_t a_col_stride, const float* b, int64_t b_row_stride,
              int64_t m, int64_t k, int64_t n, Matrix& c);

}  // namespace cmha::compress
