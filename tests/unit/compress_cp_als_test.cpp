// CP-ALS of the per-head query/key products: the factored MTTKRP against the
// dense tensor, exact recovery of a tensor of known rank, the concatenate
// factorisation, determinism and monotone errors, layers side by side.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "compress/cp_als.h"
#include "support/check.h"

using namespace cmha;
using namespace cmha::compress;

namespace {

// T as a dense double array [H, D, D], T_i = W_Q^(i)ᵀ W_K^(i) in Linear layout.
std::vector<double> dense_tensor(const HeadProducts& x) {
  const int64_t H = x.heads, D = x.dim(), dk = x.head_dim();
  std::vector<double> t(static_cast<size_t>(H * D * D), 0.0);
  const float* q = x.query.data<float>();
  const float* k = x.key.data<float>();
  for (int64_t i = 0; i < H; ++i)
    for (int64_t a = 0; a < D; ++a)
      for (int64_t b = 0; b < D; ++b) {
        double s = 0;
        for (int64_t j = i * dk; j < (i + 1) * dk; ++j) s += double(q[j * D + a]) * k[j * D + b];
        t[(i * D + a) * D + b] = s;
      }
  return t;
}

// The textbook MTTKRPs of the dense tensor.
Tensor dense_mttkrp(const HeadProducts& x, const CpFactors& f, CpMode mode) {
  const int64_t H = x.heads, D = x.dim(), R = f.rank();
  const std::vector<double> t = dense_tensor(x);
  const float* A = f.query.data<float>();
  const float* B = f.key.data<float>();
  const float* C = f.mixing.data<float>();
  Tensor out = Tensor::zeros({mode == CpMode::mixing ? H : D, R});
  float* o = out.data<float>();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t i = 0; i < H; ++i)
      for (int64_t a = 0; a < D; ++a)
        for (int64_t b = 0; b < D; ++b) {
          const double v = t[(i * D + a) * D + b];
          if (mode == CpMode::query) o[a * R + r] += float(v * B[b * R + r] * C[i * R + r]);
          if (mode == CpMode::key) o[b * R + r] += float(v * A[a * R + r] * C[i * R + r]);
          if (mode == CpMode::mixing) o[i * R + r] += float(v * A[a * R + r] * B[b * R + r]);
        }
  return out;
}

HeadProducts random_products(int64_t heads, int64_t key_dim, int64_t dim, uint64_t seed) {
  return make_head_products(test::random_tensor({key_dim, dim}, seed), test::random_tensor({key_dim, dim}, seed + 1),
                            heads, "test");
}

// A tensor of CP rank R exactly: head i's query rows are rows of diag(c_i) Ãᵀ,
// its key rows those of B̃ᵀ (head width R).
HeadProducts rank_r_products(int64_t heads, int64_t R, int64_t dim, uint64_t seed) {
  const Tensor a = test::random_tensor({dim, R}, seed), b = test::random_tensor({dim, R}, seed + 1);
  const Tensor c = test::random_tensor({heads, R}, seed + 2, 0.5f, 1.5f);
  Tensor q = Tensor::empty({heads * R, dim}), k = Tensor::empty({heads * R, dim});
  for (int64_t i = 0; i < heads; ++i)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t d = 0; d < dim; ++d) {
        q.data<float>()[(i * R + r) * dim + d] = a.data<float>()[d * R + r] * c.data<float>()[i * R + r];
        k.data<float>()[(i * R + r) * dim + d] = b.data<float>()[d * R + r];
      }
  return make_head_products(q, k, heads, "test");
}

}  // namespace

TEST(CompressCpAls, FactoredMttkrpEqualsTheDenseOne) {
  const HeadProducts x = random_products(3, 12, 10, 11);
  CpFactors f{test::random_tensor({10, 5}, 21), test::random_tensor({10, 5}, 22), test::random_tensor({3, 5}, 23)};
  for (CpMode mode : {CpMode::query, CpMode::key, CpMode::mixing})
    EXPECT_TRUE(test::all_close(mttkrp(x, f, mode), dense_mttkrp(x, f, mode), 1e-4f, 1e-4f))
        << "mode " << static_cast<int>(mode);
}

TEST(CompressCpAls, TensorNormMatchesTheDenseTensor) {
  const HeadProducts x = random_products(4, 8, 9, 31);
  double dense = 0;
  for (double v : dense_tensor(x)) dense += v * v;
  EXPECT_NEAR(tensor_norm_sq(x), dense, 1e-9 * dense);
}

TEST(CompressCpAls, ConcatenateFactorsAreExact) {
  const HeadProducts x = random_products(4, 16, 12, 41);
  const CpFactors f = concatenate_factors(x);
  EXPECT_EQ(f.rank(), 16);
  EXPECT_LT(relative_error(x, f), 1e-7);
  // Error formula against a perturbed factorisation: ‖T − T̂‖ computed densely.
  CpFactors g{f.query.clone(), f.key.clone(), f.mixing.clone()};
  g.mixing.data<float>()[0] = 0.5f;  // head 0 loses half of its first dimension
  const std::vector<double> t = dense_tensor(x);
  const int64_t D = 12, R = 16;
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t a = 0; a < D; ++a)
      for (int64_t b = 0; b < D; ++b) {
        double s = 0;
        for (int64_t r = 0; r < R; ++r)
          s += double(g.query.data<float>()[a * R + r]) * g.mixing.data<float>()[i * R + r] * g.key.data<float>()[b * R + r];
        const double v = t[(i * D + a) * D + b];
        diff += (v - s) * (v - s), norm += v * v;
      }
  EXPECT_NEAR(relative_error(x, g), std::sqrt(diff / norm), 1e-9);
}

TEST(CompressCpAls, RecoversATensorOfKnownRank) {
  const HeadProducts x = rank_r_products(4, 5, 16, 51);  // D_k = 20, CP rank 5
  for (const char* init : {"svd", "random"}) {
    CpOptions o;
    o.rank = 5;
    o.max_iters = 500;
    o.tol = 1e-10;
    o.init = init;
    o.seed = 3;
    const CpResult r = cp_als(x, o);
    EXPECT_LT(r.error, 1e-5) << init << " after " << r.iterations << " iterations";
    EXPECT_EQ(r.factors.query.shape(), (Shape{16, 5}));
    EXPECT_EQ(r.factors.mixing.shape(), (Shape{4, 5}));
  }
}

TEST(CompressCpAls, ErrorsDecreaseAndTheSeedDecides) {
  const HeadProducts x = random_products(4, 32, 24, 61);
  CpOptions o;
  o.rank = 12;
  o.max_iters = 30;
  o.tol = 0;
  o.init = "random";
  o.seed = 9;
  const CpResult a = cp_als(x, o), b = cp_als(x, o);
  ASSERT_EQ(a.iterations, 30);
  for (size_t i = 1; i < a.errors.size(); ++i) EXPECT_LE(a.errors[i], a.errors[i - 1] * (1 + 1e-5)) << i;
  EXPECT_GT(a.error, 0.05);  // rank 12 < 32: lossy
  EXPECT_LT(a.error, 1.0);
  EXPECT_NEAR(a.error, a.errors.back(), 1e-4);  // the tracked error is the true one
  EXPECT_TRUE(test::all_close(a.factors.query, b.factors.query, 0, 0));
  o.seed = 10;
  const CpResult c = cp_als(x, o);
  EXPECT_FALSE(test::all_close(a.factors.query, c.factors.query, 1e-3f, 0));
}

TEST(CompressCpAls, LayersSideBySideMatchOneAtATime) {
  // Three layers on two threads: two side by side (one thread each), the third
  // alone on both; each as cp_als on one thread computes it.
  std::vector<HeadProducts> layers;
  for (uint64_t l = 0; l < 3; ++l) layers.push_back(random_products(4, 32, 24, 91 + 2 * l));
  CpOptions o;
  o.rank = 12;
  o.max_iters = 25;
  o.tol = 0;
  o.seed = 4;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  const std::vector<CpResult> together = cp_als_layers(layers, o);
  omp_set_num_threads(1);
  ASSERT_EQ(together.size(), 3u);
  for (size_t l = 0; l < 3; ++l) {
    const CpResult alone = cp_als(layers[l], o);
    EXPECT_EQ(together[l].iterations, 25) << l;
    EXPECT_NEAR(together[l].error, alone.error, 1e-5) << l;
    EXPECT_TRUE(test::all_close(together[l].factors.query, alone.factors.query, 1e-4f, 1e-4f)) << l;
    EXPECT_TRUE(test::all_close(together[l].factors.mixing, alone.factors.mixing, 1e-4f, 1e-4f)) << l;
    EXPECT_GT(together[l].seconds.total(), 0.0);
    EXPECT_GE(together[l].wall_seconds, together[l].seconds.total());
  }
  omp_set_num_threads(2);
  o.rank = 0;  // an error in a layer side by side reaches the caller
  EXPECT_THROW(cp_als_layers(layers, o), Error);
  omp_set_num_threads(saved);
}

TEST(CompressCpAls, StopsWhenTheErrorSettles) {
  const HeadProducts x = random_products(2, 8, 8, 71);
  CpOptions o;
  o.rank = 3;
  o.max_iters = 1000;
  o.tol = 1e-3;
  const CpResult r = cp_als(x, o);
  EXPECT_LT(r.iterations, 1000);
  ASSERT_GE(r.errors.size(), 2u);
  const double last = r.errors.back(), before = r.errors[r.errors.size() - 2];
  EXPECT_LT(std::abs(before - last), 1e-3 * before);
}

TEST(CompressCpAls, BadInputIsOneSentence) {
  EXPECT_THROW(make_head_products(Tensor::zeros({6, 4}), Tensor::zeros({6, 4}), 4, "layer"), Error);
  EXPECT_THROW(make_head_products(Tensor::zeros({8, 4}), Tensor::zeros({8, 5}), 4, "layer"), Error);
  const HeadProducts x = random_products(2, 8, 8, 81);
  CpOptions o;
  o.rank = 0;
  EXPECT_THROW(cp_als(x, o), Error);
  o.rank = 2;
  o.init = "spectral";
  try {
    cp_als(x, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("init 'spectral'"), std::string::npos) << e.what();
  }
}
