#include "compress/dense_linalg.h"

#include <algorithm>
#include <cmath>

#include "tensor/error.h"

namespace cmha::compress {

namespace {

double dot(const double* x, const double* y, int64_t n) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
  return s;
}

}  // namespace

bool cholesky(const Matrix& a, Matrix& lower) {
  CMHA_CHECK(a.rows == a.cols, "cholesky: the matrix is " + std::to_string(a.rows) + " × " + std::to_string(a.cols));
  const int64_t n = a.rows;
  lower = Matrix(n, n);
  // Column by column; row i of L holds L[i, 0..i], so the dots run over contiguous rows.
  for (int64_t j = 0; j < n; ++j) {
    const double pivot = a(j, j) - dot(lower.row(j), lower.row(j), j);
    if (!(pivot > 0.0) || !std::isfinite(pivot)) return false;
    const double d = std::sqrt(pivot);
    lower(j, j) = d;
#pragma omp parallel for if (n - j > 128)
    for (int64_t i = j + 1; i < n; ++i) lower(i, j) = (a(i, j) - dot(lower.row(i), lower.row(j), j)) / d;
  }
  return true;
}

Matrix spd_inverse(const Matrix& a, double* ridge) {
  const int64_t n = a.rows;
  Matrix lower;
  double lambda = 0.0;
  if (!cholesky(a, lower)) {
    double mean_diag = 0.0;
    for (int64_t i = 0; i < n; ++i) mean_diag += std::abs(a(i, i));
    mean_diag = std::max(mean_diag / static_cast<double>(std::max<int64_t>(n, 1)), 1e-300);
    Matrix shifted = a;
    for (lambda = 1e-12 * mean_diag;; lambda *= 100.0) {
      for (int64_t i = 0; i < n; ++i) shifted(i, i) = a(i, i) + lambda;
      if (cholesky(shifted, lower)) break;
      CMHA_CHECK(std::isfinite(lambda) && lambda < 1e30 * mean_diag,
                 "spd_inverse: the matrix stays indefinite under any ridge (does it hold NaN?)");
    }
  }
  if (ridge) *ridge = lambda;
  // upper = L⁻ᵀ, built row by row: row j of L⁻ᵀ is column j of L⁻¹, the
  // solution of L x = e_j, which is zero above j.
  Matrix upper(n, n);
#pragma omp parallel for schedule(dynamic, 8) if (n > 128)
  for (int64_t j = 0; j < n; ++j) {
    double* x = upper.row(j);  // x[i] = (L⁻¹)[i, j]
    x[j] = 1.0 / lower(j, j);
    for (int64_t i = j + 1; i < n; ++i) x[i] = -dot(lower.row(i) + j, x + j, i - j) / lower(i, i);
  }
  // a⁻¹ = L⁻ᵀ L⁻¹: entry (i, j) = Σ_{k ≥ max(i, j)} (L⁻¹)[k, i] (L⁻¹)[k, j].
  Matrix inv(n, n);
#pragma omp parallel for schedule(dynamic, 8) if (n > 128)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) inv(i, j) = inv(j, i) = dot(upper.row(i) + i, upper.row(j) + i, n - i);
  return inv;
}

SymmetricEigen symmetric_eigen(const Matrix& input, bool with_vectors) {
  CMHA_CHECK(input.rows == input.cols,
             "symmetric_eigen: the matrix is " + std::to_string(input.rows) + " × " + std::to_string(input.cols));
  const int64_t n = input.rows;
  Matrix a = input;
  Matrix v(with_vectors ? n : 0, with_vectors ? n : 0);
  for (int64_t i = 0; with_vectors && i < n; ++i) v(i, i) = 1.0;
  double total = 0.0;
  for (double x : a.v) total += x * x;
  // Sweeps over all pairs; each rotation zeroes a(p, q). Converged when the
  // off-diagonal mass is negligible against the whole matrix.
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0.0;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) off += a(p, q) * a(p, q);
    if (off <= 1e-30 * total || off == 0.0) break;
    for (int64_t p = 0; p < n; ++p) {
      for (int64_t q = p + 1; q < n; ++q) {
        const double apq = a(p, q);
        if (std::abs(apq) < 1e-300) continue;
        // The angle that diagonalises the 2×2 block [[app, apq], [apq, aqq]].
        const double theta = (a(q, q) - a(p, p)) / (2.0 * apq);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1.0));
        const double c = 1.0 / std::sqrt(t * t + 1.0), s = t * c;
        // A ← Jᵀ A J: rows p, q then columns p, q.
        double* rp = a.row(p);
        double* rq = a.row(q);
        for (int64_t k = 0; k < n; ++k) {
          const double x = rp[k], y = rq[k];
          rp[k] = c * x - s * y;
          rq[k] = s * x + c * y;
        }
        for (int64_t k = 0; k < n; ++k) {
          double* rk = a.row(k);
          const double x = rk[p], y = rk[q];
          rk[p] = c * x - s * y;
          rk[q] = s * x + c * y;
        }
        if (with_vectors)
          for (int64_t k = 0; k < n; ++k) {
            double* rk = v.row(k);
            const double x = rk[p], y = rk[q];
            rk[p] = c * x - s * y;
            rk[q] = s * x + c * y;
          }
      }
    }
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return a(x, x) > a(y, y); });
  SymmetricEigen e;
  for (int64_t i : order) e.values.push_back(a(i, i));
  if (with_vectors) {
    e.vectors = Matrix(n, n);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < n; ++j) e.vectors(k, j) = v(k, order[static_cast<size_t>(j)]);
  }
  return e;
}

void gemm_f64(const float* a, int64_t a_row_stride, int64_t a_col_stride, const float* b, int64_t b_row_stride,
              int64_t m, int64_t k, int64_t n, Matrix& c) {
  c = Matrix(m, n);
  constexpr int64_t kRows = 8, kCols = 64;  // accumulator tile: 8 × 64 doubles stay in L1
  const int64_t row_blocks = (m + kRows - 1) / kRows, col_blocks = (n + kCols - 1) / kCols;
#pragma omp parallel for collapse(2) schedule(static) if (m * n * k > (1 << 20))
  for (int64_t ib = 0; ib < row_blocks; ++ib) {
    for (int64_t jb = 0; jb < col_blocks; ++jb) {
      const int64_t i0 = ib * kRows, rows = std::min(kRows, m - i0);
      const int64_t j0 = jb * kCols, cols = std::min(kCols, n - j0);
      double acc[kRows][kCols] = {};
      for (int64_t p = 0; p < k; ++p) {
        const float* bp = b + p * b_row_stride + j0;
        for (int64_t r = 0; r < rows; ++r) {
          const double ar = a[(i0 + r) * a_row_stride + p * a_col_stride];
#pragma omp simd
          for (int64_t j = 0; j < cols; ++j) acc[r][j] += ar * static_cast<double>(bp[j]);
        }
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < cols; ++j) c(i0 + r, j0 + j) = acc[r][j];
    }
  }
}

}  // namespace cmha::compress
