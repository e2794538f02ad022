#include "compress/dense_linalg.h"

#include <cblas.h>
#include <lapacke.h>
#include <oneapi/dnnl/dnnl.h>

#include <omp.h>

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

// LAPACK on one OpenMP thread for the guard's lifetime (see dense_linalg.h):
// OpenBLAS's OpenMP build sizes its teams by omp_get_max_threads().
class OneThread {
 public:
  OneThread() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(saved_); }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int saved_;
};

bool cholesky(const Matrix& a, Matrix& lower) {
  check_square(a, "cholesky");
  OneThread serial;
  if (!factor(a, lower)) return false;
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t j = i + 1; j < a.cols; ++j) lower(i, j) = 0.0;  // dpotrf leaves the upper triangle as it was
  return true;
}

Matrix spd_factor(const Matrix& a, double* ridge) {
  check_square(a, "spd_factor");
  const int64_t n = a.rows;
  for (double x : a.v) CMHA_CHECK(std::isfinite(x), "spd_inverse: the matrix holds NaN or infinity");
  OneThread serial;
  Matrix f;
  double lambda = 0.0;
  if (!factor(a, f)) {
    double mean_diag = 0.0;
    for (int64_t i = 0; i < n; ++i) mean_diag += std::abs(a(i, i));
    mean_diag = std::max(mean_diag / static_cast<double>(std::max<int64_t>(n, 1)), 1e-300);
    Matrix shifted = a;
    for (lambda = 1e-12 * mean_diag;; lambda *= 100.0) {
      for (int64_t i = 0; i < n; ++i) shifted(i, i) = a(i, i) + lambda;
      if (factor(shifted, f)) break;
      CMHA_CHECK(lambda < 1e30 * mean_diag, "spd_inverse: the matrix stays indefinite under any ridge");
    }
  }
  if (ridge) *ridge = lambda;
  return f;
}

void spd_solve_rows(const Matrix& factor, Matrix& rhs) {
  check_square(factor, "spd_solve_rows");
  CMHA_CHECK(rhs.cols == factor.rows, "spd_solve_rows: " + std::to_string(rhs.cols) + " columns against a " +
                                          std::to_string(factor.rows) + "-wide matrix");
  if (rhs.rows == 0 || rhs.cols == 0) return;
  OneThread serial;
  // Row-major rhs [k, n] is column-major [n, k]: its rows are LAPACK's right-hand sides.
  const auto n = static_cast<lapack_int>(factor.rows);
  const lapack_int info = LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'U', n, static_cast<lapack_int>(rhs.rows),
                                         factor.v.data(), n, rhs.v.data(), n);
  CMHA_CHECK(info == 0, "spd_solve_rows: LAPACK's dpotrs failed (info " + std::to_string(info) + ")");
}

namespace {

// In-place inverse of the row-major lower-triangular n × n matrix at l (row
// stride ld; the upper triangle is neither read nor written), recursively:
// inv [[A, 0], [B, C]] = [[A⁻¹, 0], [−C⁻¹ B A⁻¹, C⁻¹]], the off-diagonal block
// by two dtrmm. The same flops as LAPACK's dtrtri, which OpenBLAS 0.3.21 runs
// at a quarter of dtrmm's speed (1.8 ms against 0.4 ms at n = 384, one thread).
void invert_lower(double* l, int64_t n, int64_t ld) {
  constexpr int64_t kLeaf = 32;
  if (n <= kLeaf) {  // column by column: X(i, j) = −Σ_{j≤k<i} L(i, k) X(k, j) / L(i, i)
    double t[kLeaf * kLeaf];
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k <= i; ++k) t[i * kLeaf + k] = l[i * ld + k];
    for (int64_t j = 0; j < n; ++j) {
      l[j * ld + j] = 1.0 / t[j * kLeaf + j];
      for (int64_t i = j + 1; i < n; ++i) {
        double s = 0.0;
        for (int64_t k = j; k < i; ++k) s += t[i * kLeaf + k] * l[k * ld + j];
        l[i * ld + j] = -s / t[i * kLeaf + i];
      }
    }
    return;
  }
  const int64_t n1 = n / 2, n2 = n - n1;
  double* a = l;
  double* b = l + n1 * ld;
  double* c = b + n1;
  invert_lower(a, n1, ld);
  invert_lower(c, n2, ld);
  cblas_dtrmm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, static_cast<blasint>(n2),
              static_cast<blasint>(n1), -1.0, c, static_cast<blasint>(ld), b, static_cast<blasint>(ld));
  cblas_dtrmm(CblasRowMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, static_cast<blasint>(n2),
              static_cast<blasint>(n1), 1.0, a, static_cast<blasint>(ld), b, static_cast<blasint>(ld));
}

}  // namespace

Matrix spd_inverse(const Matrix& a, double* ridge) {
  check_square(a, "spd_inverse");
  const int64_t n = a.rows;
  Matrix inv = spd_factor(a, ridge);
  if (n == 0) return inv;
  OneThread serial;
  // a⁻¹ = L⁻ᵀ L⁻¹: L⁻¹ in place (row-major lower = LAPACK's column-major
  // upper U⁻¹), then dlauum's U⁻¹ U⁻ᵀ, which is dpotri's second half.
  invert_lower(inv.v.data(), n, n);
  const lapack_int info = LAPACKE_dlauum(LAPACK_COL_MAJOR, 'U', static_cast<lapack_int>(n), inv.v.data(),
                                         static_cast<lapack_int>(n));
  CMHA_CHECK(info == 0, "spd_inverse: LAPACK's dlauum failed (info " + std::to_string(info) + ")");
  for (int64_t i = 0; i < n; ++i)  // dlauum fills the lower triangle: mirror it
    for (int64_t j = i + 1; j < n; ++j) inv(i, j) = inv(j, i);
  return inv;
}

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
           int64_t ldb, float* c, int64_t ldc, float beta) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // c = beta · c, which BLAS need not be trusted with
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta,
                                      c, ldc);
  CMHA_CHECK(st == dnnl_success, "sgemm: oneDNN's dnnl_sgemm failed (status " + std::to_string(static_cast<int>(st)) +
                                     ")");
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
