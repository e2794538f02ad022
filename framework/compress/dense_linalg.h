#pragma once
// Double-precision linear algebra on the small dense matrices of CP-ALS and
// of the head analysis (rank × rank normal equations, D × D Gram matrices).
// No LAPACK: Cholesky, the SPD inverse built on it, a cyclic Jacobi
// eigensolver, and a GEMM of f32 operands with f64 accumulation for the
// quantities whose f32 rounding would show (errors near exact recovery).
#include <cstddef>
#include <cstdint>
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

// Lower-triangular L with L Lᵀ = a (a symmetric; only its lower triangle is
// read). False when a pivot is not positive (a not positive definite).
bool cholesky(const Matrix& a, Matrix& lower);

// Inverse of a symmetric positive semi-definite matrix. A singular or
// indefinite a gets a ridge λ·I added, λ growing from 1e-12 of the mean
// diagonal by factors of 100 until the Cholesky succeeds; *ridge reports the
// λ used (0 when none was needed).
Matrix spd_inverse(const Matrix& a, double* ridge = nullptr);

// Eigen-decomposition of a symmetric matrix by cyclic Jacobi rotations:
// eigenvalues in descending order, and (when asked) the matching unit
// eigenvectors as the columns of `vectors`.
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
