#include "compress/dense_linalg.h"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "tensor/error.h"

namespace cmha::compress {

namespace {

void check_square(const Matrix& a, const char* what) {
  CMHA_CHECK(a.rows == a.cols,
             std::string(what) + ": the matrix is " + std::to_string(a.rows) + " × " + std::to_string(a.cols));
}

// LAPACK is column-major; LAPACKE's row-major calls transpose in and out.
// A symmetric matrix needs neither: its row-major lower triangle is the
// column-major upper one, so the calls below say COL_MAJOR with 'U' and
// read and write the row-major lower triangle in place.

// dpotrf on a copy of a, writing L (L Lᵀ = a) into the lower triangle: true when positive definite.
bool factor(const Matrix& a, Matrix& lower) {
  lower = a;
  const auto n = static_cast<lapack_int>(a.rows);
  if (n == 0) return true;
  for (double x : a.v)
    if (!std::isfinite(x)) return false;
  return LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'U', n, lower.v.data(), n) == 0;
}

}  // namespace

bool cholesky(const Matrix& a, Matrix& lower) {
  check_square(a, "cholesky");
  if (!factor(a, lower)) return false;
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t j = i + 1; j < a.cols; ++j) lower(i, j) = 0.0;  // dpotrf leaves the upper triangle as it was
  return true;
}

Matrix spd_inverse(const Matrix& a, double* ridge) {
  check_square(a, "spd_inverse");
  const int64_t n = a.rows;
  for (double x : a.v) CMHA_CHECK(std::isfinite(x), "spd_inverse: the matrix holds NaN or infinity");
  Matrix inv;
  double lambda = 0.0;
  if (!factor(a, inv)) {
    double mean_diag = 0.0;
    for (int64_t i = 0; i < n; ++i) mean_diag += std::abs(a(i, i));
    mean_diag = std::max(mean_diag / static_cast<double>(std::max<int64_t>(n, 1)), 1e-300);
    Matrix shifted = a;
    for (lambda = 1e-12 * mean_diag;; lambda *= 100.0) {
      for (int64_t i = 0; i < n; ++i) shifted(i, i) = a(i, i) + lambda;
      if (factor(shifted, inv)) break;
      CMHA_CHECK(lambda < 1e30 * mean_diag, "spd_inverse: the matrix stays indefinite under any ridge");
    }
  }
  if (ridge) *ridge = lambda;
  if (n == 0) return inv;
  const lapack_int info = LAPACKE_dpotri(LAPACK_COL_MAJOR, 'U', static_cast<lapack_int>(n), inv.v.data(),
                                         static_cast<lapack_int>(n));
  CMHA_CHECK(info == 0, "spd_inverse: LAPACK's dpotri failed (info " + std::to_string(info) + ")");
  for (int64_t i = 0; i < n; ++i)  // dpotri fills the lower triangle: mirror it
    for (int64_t j = i + 1; j < n; ++j) inv(i, j) = inv(j, i);
  return inv;
}

SymmetricEigen symmetric_eigen(const Matrix& input, bool with_vectors) {
  check_square(input, "symmetric_eigen");
  const int64_t n = input.rows;
  for (double x : input.v) CMHA_CHECK(std::isfinite(x), "symmetric_eigen: the matrix holds NaN or infinity");
  Matrix a = input;
  std::vector<double> w(static_cast<size_t>(n));
  if (n > 0) {
    const lapack_int info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, with_vectors ? 'V' : 'N', 'U',
                                           static_cast<lapack_int>(n), a.v.data(), static_cast<lapack_int>(n), w.data());
    CMHA_CHECK(info == 0, "symmetric_eigen: LAPACK's dsyevd did not converge (info " + std::to_string(info) + ")");
  }
  // dsyevd gives ascending order; callers want the largest first. Eigenvector
  // j is column j of the column-major result: row j of `a` as stored.
  SymmetricEigen e;
  e.values.assign(w.rbegin(), w.rend());
  if (with_vectors) {
    e.vectors = Matrix(n, n);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < n; ++j) e.vectors(k, j) = a(n - 1 - j, k);
  }
  return e;
}

void gemm_f64(const float* a, int64_t a_row_stride, int64_t a_col_stride, const float* b, int64_t b_row_stride,
              int64_t m, int64_t k, int64_t n, Matrix& c) {
  // Widen both operands to contiguous double (cheap against the m·k·n
  // multiply-adds), then one dgemm.
  Matrix ad(m, k), bd(k, n);
#pragma omp parallel for if (m * k > (1 << 16))
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) ad(i, p) = a[i * a_row_stride + p * a_col_stride];
#pragma omp parallel for if (k * n > (1 << 16))
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) bd(p, j) = b[p * b_row_stride + j];
  c = Matrix(m, n);
  if (m == 0 || n == 0 || k == 0) return;
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), 1.0, ad.v.data(), static_cast<blasint>(k), bd.v.data(), static_cast<blasint>(n),
              0.0, c.v.data(), static_cast<blasint>(n));
}

}  // namespace cmha::compress
