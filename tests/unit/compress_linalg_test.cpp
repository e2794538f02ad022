// Double-precision helpers of the compression code (on LAPACK/BLAS): Cholesky,
// the SPD inverse and solve with their ridge, the symmetric eigen-decomposition,
// the f64 and f32 GEMMs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "compress/dense_linalg.h"
#include "support/check.h"

using namespace cmha;
using namespace cmha::compress;

namespace {

// B Bᵀ + shift·I for a random n × n B: symmetric, positive definite when shift > 0.
Matrix random_spd(int64_t n, uint64_t seed, double shift) {
  Tensor b = test::random_tensor({n, n}, seed);
  const float* p = b.data<float>();
  Matrix a(n, n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += double(p[i * n + k]) * p[j * n + k];
      a(i, j) = s + (i == j ? shift : 0.0);
    }
  return a;
}

// max |x·a − rhs| over the entries.
double residual(const Matrix& x, const Matrix& a, const Matrix& rhs) {
  double worst = 0;
  for (int64_t i = 0; i < x.rows; ++i)
    for (int64_t j = 0; j < a.cols; ++j) {
      double s = 0;
      for (int64_t k = 0; k < a.rows; ++k) s += x(i, k) * a(k, j);
      worst = std::max(worst, std::abs(s - rhs(i, j)));
    }
  return worst;
}

Matrix random_matrix(int64_t rows, int64_t cols, uint64_t seed) {
  const Tensor t = test::random_tensor({rows, cols}, seed);
  Matrix m(rows, cols);
  for (size_t i = 0; i < m.v.size(); ++i) m.v[i] = t.data<float>()[i];
  return m;
}

}  // namespace

TEST(CompressLinalg, CholeskyReproducesTheMatrix) {
  const Matrix a = random_spd(9, 1, 0.5);
  Matrix l;
  ASSERT_TRUE(cholesky(a, l));
  for (int64_t i = 0; i < 9; ++i)
    for (int64_t j = 0; j < 9; ++j) {
      if (j > i) EXPECT_EQ(l(i, j), 0.0);
      double s = 0;
      for (int64_t k = 0; k < 9; ++k) s += l(i, k) * l(j, k);
      EXPECT_NEAR(s, a(i, j), 1e-12);
    }
}

TEST(CompressLinalg, CholeskyRefusesAnIndefiniteMatrix) {
  Matrix a(2, 2);
  a(0, 0) = 1, a(0, 1) = a(1, 0) = 2, a(1, 1) = 1;  // eigenvalues 3 and -1
  Matrix l;
  EXPECT_FALSE(cholesky(a, l));
}

TEST(CompressLinalg, SpdInverseOfAWellConditionedMatrix) {
  const Matrix a = random_spd(40, 2, 1.0);
  double ridge = -1;
  const Matrix inv = spd_inverse(a, &ridge);
  EXPECT_EQ(ridge, 0.0);
  Matrix identity(40, 40);
  for (int64_t i = 0; i < 40; ++i) identity(i, i) = 1.0;
  EXPECT_LT(residual(inv, a, identity), 1e-10);
  for (int64_t i = 0; i < 40; ++i)
    for (int64_t j = 0; j < 40; ++j) EXPECT_EQ(inv(i, j), inv(j, i));  // both triangles filled
}

TEST(CompressLinalg, SpdInverseOfALargeMatrix) {
  const Matrix a = random_spd(384, 3, 384.0), rhs = random_matrix(50, 384, 13);
  Matrix x(50, 384);  // rhs · a⁻¹, as ALS uses it
  const Matrix inv = spd_inverse(a);
  for (int64_t i = 0; i < 50; ++i)
    for (int64_t k = 0; k < 384; ++k)
      for (int64_t j = 0; j < 384; ++j) x(i, j) += rhs(i, k) * inv(k, j);
  EXPECT_LT(residual(x, a, rhs), 1e-9);
}

TEST(CompressLinalg, SpdInverseOfAnOddSizePastTheRecursionLeaf) {
  // 101: the recursive triangular inverse splits 50 + 51, then down to leaves of ≤ 32.
  const Matrix a = random_spd(101, 6, 5.0);
  const Matrix inv = spd_inverse(a);
  Matrix identity(101, 101);
  for (int64_t i = 0; i < 101; ++i) identity(i, i) = 1.0;
  EXPECT_LT(residual(inv, a, identity), 1e-10);
}

TEST(CompressLinalg, SpdSolveRowsSolvesEachRow) {
  const Matrix a = random_spd(70, 7, 2.0), rhs = random_matrix(12, 70, 17);
  double ridge = -1;
  const Matrix f = spd_factor(a, &ridge);
  EXPECT_EQ(ridge, 0.0);
  Matrix x = rhs;  // x · a = rhs, row by row
  spd_solve_rows(f, x);
  EXPECT_LT(residual(x, a, rhs), 1e-10);
  Matrix wrong(3, 69);
  EXPECT_THROW(spd_solve_rows(f, wrong), Error);
}

TEST(CompressLinalg, SpdInverseFactorTimesItsTransposeIsTheInverse) {
  const Matrix a = random_spd(77, 8, 3.0);
  const Matrix m = spd_inverse_factor(a);
  Matrix mmt(77, 77), identity(77, 77);
  for (int64_t i = 0; i < 77; ++i) {
    identity(i, i) = 1.0;
    for (int64_t j = 0; j < i; ++j) EXPECT_EQ(m(i, j), 0.0);  // upper triangular
    for (int64_t j = 0; j < 77; ++j)
      for (int64_t k = 0; k < 77; ++k) mmt(i, j) += m(i, k) * m(j, k);
  }
  EXPECT_LT(residual(mmt, a, identity), 1e-10);
  // x · m and x · mᵀ in f32 against the definition
  std::vector<float> mf(m.v.begin(), m.v.end());
  const Tensor x = test::random_tensor({5, 77}, 23);
  for (bool trans : {false, true}) {
    std::vector<float> y(x.data<float>(), x.data<float>() + 5 * 77);
    trmm_right_upper(mf.data(), 77, trans, y.data(), 5);
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 77; ++j) {
        double want = 0;
        for (int64_t k = 0; k < 77; ++k) want += double(x.data<float>()[i * 77 + k]) * (trans ? m(j, k) : m(k, j));
        EXPECT_NEAR(y[i * 77 + j], want, 1e-4 * (1 + std::abs(want))) << trans << " " << i << " " << j;
      }
  }
}

TEST(CompressLinalg, SgemmMatchesTheDefinitionInEveryTransposition) {
  const Tensor a = test::random_tensor({7, 5}, 21), b = test::random_tensor({5, 9}, 22);
  const Tensor at = a.transpose(0, 1).contiguous(), bt = b.transpose(0, 1).contiguous();  // [5, 7], [9, 5]
  std::vector<float> want(7 * 9, 0.0f);
  for (int64_t i = 0; i < 7; ++i)
    for (int64_t j = 0; j < 9; ++j)
      for (int64_t k = 0; k < 5; ++k) want[i * 9 + j] += a.data<float>()[i * 5 + k] * b.data<float>()[k * 9 + j];
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      std::vector<float> c(7 * 9, 1.0f);
      sgemm(ta, tb, 7, 9, 5, (ta ? at : a).data<float>(), ta ? 7 : 5, (tb ? bt : b).data<float>(), tb ? 5 : 9,
            c.data(), 9, 0.5f);  // c = op(a) op(b) + 0.5 · 1
      for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], want[i] + 0.5f, 1e-5f) << ta << tb << i;
    }
  std::vector<float> c(6, 3.0f);
  sgemm(false, false, 2, 3, 0, nullptr, 1, nullptr, 3, c.data(), 3, 0.0f);  // k = 0: c = 0
  for (float v : c) EXPECT_EQ(v, 0.0f);
}

TEST(CompressLinalg, SpdInverseOfASingularMatrixAddsARidge) {
  Matrix a(3, 3);  // rank 1: v vᵀ with v = (1, 2, 3)
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) a(i, j) = (i + 1.0) * (j + 1.0);
  double ridge = 0;
  const Matrix inv = spd_inverse(a, &ridge);
  EXPECT_GT(ridge, 0.0);
  EXPECT_LT(ridge, 1e-3);
  for (double v : inv.v) EXPECT_TRUE(std::isfinite(v));
}

TEST(CompressLinalg, SpdInverseRefusesNaNAndNonSquare) {
  Matrix a = random_spd(4, 5, 1.0);
  EXPECT_THROW(spd_inverse(Matrix(2, 3)), Error);
  a(1, 1) = NAN;
  EXPECT_THROW(spd_inverse(a), Error);
}

TEST(CompressLinalg, EigenDecomposesASymmetricMatrix) {
  Matrix a = random_spd(12, 4, 0.0);
  a(0, 0) -= 5.0;  // indefinite too
  const SymmetricEigen e = symmetric_eigen(a);
  ASSERT_EQ(e.values.size(), 12u);
  for (size_t i = 1; i < e.values.size(); ++i) EXPECT_GE(e.values[i - 1], e.values[i]);
  // A v_j = λ_j v_j, and the vectors are orthonormal.
  for (int64_t j = 0; j < 12; ++j) {
    for (int64_t i = 0; i < 12; ++i) {
      double av = 0;
      for (int64_t k = 0; k < 12; ++k) av += a(i, k) * e.vectors(k, j);
      EXPECT_NEAR(av, e.values[j] * e.vectors(i, j), 1e-10);
    }
    for (int64_t l = 0; l < 12; ++l) {
      double d = 0;
      for (int64_t k = 0; k < 12; ++k) d += e.vectors(k, j) * e.vectors(k, l);
      EXPECT_NEAR(d, j == l ? 1.0 : 0.0, 1e-12);
    }
  }
  double trace = 0, sum = 0;
  for (int64_t i = 0; i < 12; ++i) trace += a(i, i), sum += e.values[i];
  EXPECT_NEAR(trace, sum, 1e-10);
}

TEST(CompressLinalg, EigenFindsKnownEigenvalues) {
  Matrix a(3, 3);  // [[2, 1, 0], [1, 2, 0], [0, 0, 5]]: 5, 3, 1
  a(0, 0) = a(1, 1) = 2, a(0, 1) = a(1, 0) = 1, a(2, 2) = 5;
  const SymmetricEigen e = symmetric_eigen(a, false);
  EXPECT_NEAR(e.values[0], 5.0, 1e-14);
  EXPECT_NEAR(e.values[1], 3.0, 1e-14);
  EXPECT_NEAR(e.values[2], 1.0, 1e-14);
  EXPECT_EQ(e.vectors.rows, 0);
}

TEST(CompressLinalg, EigenOfA768MatrixIsExact) {  // the size of cmha heads / the SVD start on BERT-base
  const Matrix a = random_spd(768, 7, 0.0);
  const SymmetricEigen e = symmetric_eigen(a);
  double worst = 0;  // ‖A v_j − λ_j v_j‖∞ over a few j, relative to λ_max
  for (int64_t j : {0, 1, 383, 767})
    for (int64_t i = 0; i < 768; ++i) {
      double av = 0;
      for (int64_t k = 0; k < 768; ++k) av += a(i, k) * e.vectors(k, j);
      worst = std::max(worst, std::abs(av - e.values[j] * e.vectors(i, j)));
    }
  EXPECT_LT(worst / e.values[0], 1e-12);
}

TEST(CompressLinalg, GemmF64MatchesTheDefinitionThroughStrides) {
  // a used transposed (stride trick), b with a row stride wider than its columns.
  const Tensor a = test::random_tensor({70, 13}, 5);  // read as aᵀ: [13, 70]
  const Tensor b = test::random_tensor({70, 90}, 6);  // read columns 0..80 only
  Matrix c;
  gemm_f64(a.data<float>(), 1, 13, b.data<float>(), 90, 13, 70, 81, c);
  ASSERT_EQ(c.rows, 13);
  ASSERT_EQ(c.cols, 81);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  for (int64_t i = 0; i < 13; ++i)
    for (int64_t j = 0; j < 81; ++j) {
      double s = 0;
      for (int64_t k = 0; k < 70; ++k) s += double(pa[k * 13 + i]) * pb[k * 90 + j];
      EXPECT_NEAR(c(i, j), s, 1e-12);
    }
}

extern "C" int openblas_get_parallel(void);
extern "C" int openblas_get_num_threads(void);

// Debian's alternatives may load OpenBLAS's pthreads build whatever cmha was
// built against; its own thread pool then fights cmha's OpenMP threads (two
// CP-ALS layers side by side: the R × R solves 100× slower), so under any
// build but the OpenMP one dense_linalg runs OpenBLAS on the calling thread.
// (Run with LD_LIBRARY_PATH at an openblas-pthread directory to take the else branch.)
TEST(CompressLinalg, BlasRunsOnTheCallersThreadUnlessItIsTheOpenMPBuild) {
  const std::string about = blas_description();
  EXPECT_NE(about.find("OpenBLAS"), std::string::npos) << about;
  if (openblas_get_parallel() == 2) {
    EXPECT_NE(about.find("OpenMP build"), std::string::npos) << about;
  } else {
    EXPECT_EQ(openblas_get_num_threads(), 1) << about;
    Matrix lower;
    EXPECT_TRUE(cholesky(random_spd(64, 5, 1.0), lower));
    EXPECT_EQ(openblas_get_num_threads(), 1) << about;
  }
}
