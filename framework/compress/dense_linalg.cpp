#include "compress/dense_linalg.h"

#include <cblas.h>
#include <lapacke.h>
#include <oneapi/dnnl/dnnl.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>

#include "tensor/error.h"

namespace cmha::compress {

namespace {

void check_square(const Matrix& a, const char* what) {
  CMHA_CHECK(a.rows == a.cols,
             std::string(what) + ": the matrix is " + std::to_string(a.rows) + " × " + std::to_string(a.cols));
}

// LAPACK is column-major; LAPACKE's row-major calls transpose in and out.
// A symmetric matrix needs neither: its row-major upper triangle is the
// column-major lower one, so the calls below say COL_MAJOR with 'L' and read
// and write the row-major upper triangle in place ('L': OpenBLAS 0.3.21's
// dpotrf is 30 % faster lower than upper, 0.60 against 0.84 ms at 384 × 384).
// The factor L (L Lᵀ = a, column-major lower) is thus Lᵀ in the row-major
// upper triangle. The R × R calls go through LAPACKE's _work forms, which
// skip its NaN scan of every input (1.5 % of a CP-ALS iteration): the inputs
// are checked finite here first.

bool all_finite(const Matrix& a) {
  for (double x : a.v)
    if (!std::isfinite(x)) return false;
  return true;
}

// dpotrf on a copy of a (finite), writing Lᵀ into the row-major upper triangle: true when positive definite.
bool factor(const Matrix& a, Matrix& f) {
  f = a;
  const auto n = static_cast<lapack_int>(a.rows);
  return n == 0 || LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'L', n, f.v.data(), n) == 0;
}

// Debian ships OpenBLAS in three builds behind one soname, libopenblas.so.0,
// and update-alternatives picks the one a process loads by priority
// (pthreads 100, OpenMP 95, serial 90): a machine with libopenblas0-pthread
// installed beside libopenblas0-openmp runs the pthreads build, whatever cmha
// was built against. The OpenMP build joins cmha's libgomp threads: a call
// from inside an active parallel region runs on its caller's thread, and
// OneThread keeps the R × R calls serial outside one. The pthreads build
// ignores both and wakes its own pool for every call: with two CP-ALS layers
// side by side, each thread's dpotrf then fights the pool's busy-waiting
// workers for the same cores. A 384 × 384 dpotrf and 14 small dtrmm from
// each of 2 OpenMP threads: 2.1 ms with the OpenMP build, 290 ms with the
// pthreads one (same loaded 2-core machine, LD_LIBRARY_PATH choosing the
// build): the "R x R normal equations" at 50 % of a CP-ALS iteration on a
// machine of issue 32. So under any build but the OpenMP one, OpenBLAS runs
// every call on its caller's thread (openblas_set_num_threads(1), once, for
// the process): cmha's parallelism is its own OpenMP threads.
void settle_blas_threads() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (openblas_get_parallel() != OPENBLAS_OPENMP) openblas_set_num_threads(1);
  });
}

// LAPACK on one OpenMP thread for the guard's lifetime (see dense_linalg.h):
// OpenBLAS's OpenMP build sizes its teams by omp_get_max_threads().
class OneThread {
 public:
  OneThread() : saved_(omp_get_max_threads()) {
    settle_blas_threads();
    omp_set_num_threads(1);
  }
  ~OneThread() { omp_set_num_threads(saved_); }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int saved_;
};

// In-place inverse of the column-major lower-triangular n × n matrix at l
// (column stride ld; the strict upper triangle is neither read nor written),
// recursively: inv [[A, 0], [B, C]] = [[A⁻¹, 0], [−C⁻¹ B A⁻¹, C⁻¹]], the
// off-diagonal block by two dtrmm. The same flops as LAPACK's dtrtri, which
// OpenBLAS 0.3.21 runs at a quarter of dtrmm's speed (1.7 ms against 0.45 ms
// at n = 384, one thread).
void invert_lower(double* l, int64_t n, int64_t ld) {
  constexpr int64_t kLeaf = 32;
  if (n <= kLeaf) {  // column by column: X(i, j) = −Σ_{j≤k<i} L(i, k) X(k, j) / L(i, i)
    double t[kLeaf * kLeaf];  // L by rows
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = k; i < n; ++i) t[i * kLeaf + k] = l[i + k * ld];
    for (int64_t j = 0; j < n; ++j) {
      double* x = l + j * ld;  // column j of X
      x[j] = 1.0 / t[j * kLeaf + j];
      for (int64_t i = j + 1; i < n; ++i) {
        double s = 0.0;
        for (int64_t k = j; k < i; ++k) s += t[i * kLeaf + k] * x[k];
        x[i] = -s / t[i * kLeaf + i];
      }
    }
    return;
  }
  const int64_t n1 = n / 2, n2 = n - n1;
  double* a = l;
  double* b = l + n1;            // rows n1.., columns ..n1
  double* c = l + n1 + n1 * ld;  // rows and columns n1..
  invert_lower(a, n1, ld);
  invert_lower(c, n2, ld);
  cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, static_cast<blasint>(n2),
              static_cast<blasint>(n1), -1.0, c, static_cast<blasint>(ld), b, static_cast<blasint>(ld));
  cblas_dtrmm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, static_cast<blasint>(n2),
              static_cast<blasint>(n1), 1.0, a, static_cast<blasint>(ld), b, static_cast<blasint>(ld));
}

// The row-major upper triangle copied onto the lower one.
void mirror_upper(Matrix& m) {
  constexpr int64_t kTile = 32;  // tiles, so the strided reads stay in cache
  const int64_t n = m.rows;
  for (int64_t i0 = 0; i0 < n; i0 += kTile)
    for (int64_t j0 = 0; j0 <= i0; j0 += kTile)
      for (int64_t i = i0; i < std::min(n, i0 + kTile); ++i)
        for (int64_t j = j0; j < std::min(i, j0 + kTile); ++j) m(i, j) = m(j, i);
}

}  // namespace

bool cholesky(const Matrix& a, Matrix& lower) {
  check_square(a, "cholesky");
  OneThread serial;
  Matrix f;
  if (!all_finite(a) || !factor(a, f)) return false;
  lower = Matrix(a.rows, a.cols);
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t j = 0; j <= i; ++j) lower(i, j) = f(j, i);  // Lᵀ is f's upper triangle
  return true;
}

Matrix spd_factor(const Matrix& a, double* ridge) {
  check_square(a, "spd_factor");
  const int64_t n = a.rows;
  CMHA_CHECK(all_finite(a), "spd_inverse: the matrix holds NaN or infinity");
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
  const lapack_int info = LAPACKE_dpotrs_work(LAPACK_COL_MAJOR, 'L', n, static_cast<lapack_int>(rhs.rows),
                                              factor.v.data(), n, rhs.v.data(), n);
  CMHA_CHECK(info == 0, "spd_solve_rows: LAPACK's dpotrs failed (info " + std::to_string(info) + ")");
}

Matrix spd_inverse(const Matrix& a, double* ridge) {
  check_square(a, "spd_inverse");
  const int64_t n = a.rows;
  Matrix inv = spd_factor(a, ridge);
  if (n == 0) return inv;
  OneThread serial;
  // a⁻¹ = L⁻ᵀ L⁻¹: L⁻¹ in place, then dlauum's (L⁻¹)ᵀ L⁻¹, which is dpotri's second half.
  invert_lower(inv.v.data(), n, n);
  const lapack_int info = LAPACKE_dlauum_work(LAPACK_COL_MAJOR, 'L', static_cast<lapack_int>(n), inv.v.data(),
                                              static_cast<lapack_int>(n));
  CMHA_CHECK(info == 0, "spd_inverse: LAPACK's dlauum failed (info " + std::to_string(info) + ")");
  mirror_upper(inv);  // dlauum wrote the row-major upper triangle
  return inv;
}

Matrix spd_inverse_factor(const Matrix& a, double* ridge) {
  check_square(a, "spd_inverse_factor");
  const int64_t n = a.rows;
  Matrix m = spd_factor(a, ridge);
  if (n == 0) return m;
  OneThread serial;
  invert_lower(m.v.data(), n, n);  // column-major L⁻¹ = row-major upper L⁻ᵀ
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < i; ++j) m(i, j) = 0.0;
  return m;
}

std::string blas_description() {
  settle_blas_threads();
  const int parallel = openblas_get_parallel();
  return std::string(openblas_get_config()) + ", core " + openblas_get_corename() + ", " +
         (parallel == OPENBLAS_OPENMP ? "OpenMP build"
          : parallel == OPENBLAS_THREAD ? "pthreads build (run on the calling thread)"
                                        : "serial build");
}

void trmm_right_upper(const float* m, int64_t n, bool trans, float* x, int64_t rows) {
  if (rows == 0 || n == 0) return;
  settle_blas_threads();
  cblas_strmm(CblasRowMajor, CblasRight, CblasUpper, trans ? CblasTrans : CblasNoTrans, CblasNonUnit,
              static_cast<blasint>(rows), static_cast<blasint>(n), 1.0f, m, static_cast<blasint>(n), x,
              static_cast<blasint>(n));
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
  settle_blas_threads();
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
  settle_blas_threads();
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), 1.0, ad.v.data(), static_cast<blasint>(k), bd.v.data(), static_cast<blasint>(n),
              0.0, c.v.data(), static_cast<blasint>(n));
}

}  // namespace cmha::compress
