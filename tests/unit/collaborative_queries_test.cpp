// collaborative_queries (collaborative attention's per-head queries with the
// content-bias columns) and matmul's folding of a shared right operand into
// the rows, which the collaborative and grouped layers rely on: PyTorch
// comparison, gradient checks, a large multi-threaded shape against a double
// reference, and errors.
#include <gtest/gtest.h>
#include <omp.h>

#include <vector>

#include "autograd/ops.h"
#include "support/check.h"
#include "support/threads.h"

using namespace cmha;
using namespace cmha::test;

namespace {

using In = const std::vector<Tensor>&;

using cmha::test::with_threads;

}  // namespace

TEST(CollaborativeQueries, MatchesPyTorch) {
  EXPECT_TRUE(matches_fixture("collaborative_queries",
                              [](auto& in) { return collaborative_queries(in.at("q"), in.at("m"), 0.37f); }));
}

TEST(CollaborativeQueries, Gradcheck) {
  Tensor q = random_tensor({2, 3, 4}, 61, -1, 1, true), m = random_tensor({3, 4}, 62, -1, 1, true);
  EXPECT_TRUE(gradcheck([](In x) { return collaborative_queries(x[0], x[1], 0.5f); }, {q, m}));
  // A transposed (non-contiguous) query view.
  Tensor qt = random_tensor({2, 4, 3}, 63, -1, 1, true);
  EXPECT_TRUE(gradcheck([](In x) { return collaborative_queries(x[0].transpose(1, 2), x[1], 1.5f); }, {qt, m}));
}

TEST(CollaborativeQueries, LargeMatchesDoubleReferenceForAnyThreadCount) {
  const int64_t B = 6, Tq = 37, Dk = 40, H = 5, W = Dk + H;  // 49950 outputs: the parallel path
  const float scale = 0.125f;
  Tensor q = random_tensor({B, Tq, Dk}, 64, -2, 2, true), m = random_tensor({H, Dk}, 65, -1, 1, true);
  Tensor g = random_tensor({B, H, Tq, W}, 66);
  auto run = [&] {
    q.zero_grad();
    m.zero_grad();
    Tensor y = collaborative_queries(q, m, scale);
    y.backward(g);
    return std::vector<Tensor>{y.detach(), q.grad(), m.grad()};
  };
  const auto one = with_threads(1, run), two = with_threads(2, run);
  for (size_t k = 0; k < one.size(); ++k)
    EXPECT_EQ(one[k].to_float_vector(), two[k].to_float_vector()) << "output " << k;

  const std::vector<float> qv = q.to_float_vector(), mv = m.to_float_vector(), gv = g.to_float_vector();
  std::vector<float> want_y(B * H * Tq * W), want_dq(B * Tq * Dk);
  std::vector<double> dm(H * Dk, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tq; ++t)
      for (int64_t d = 0; d < Dk; ++d) {
        double dq = 0;
        for (int64_t h = 0; h < H; ++h) {
          const int64_t o = ((b * H + h) * Tq + t) * W;
          want_y[o + d] = static_cast<float>(double(scale) * qv[(b * Tq + t) * Dk + d] * mv[h * Dk + d]);
          dq += double(scale) * gv[o + d] * mv[h * Dk + d];
          dm[h * Dk + d] += double(scale) * gv[o + d] * qv[(b * Tq + t) * Dk + d];
          if (d < H) want_y[o + Dk + d] = d == h ? scale : 0.0f;
        }
        want_dq[(b * Tq + t) * Dk + d] = static_cast<float>(dq);
      }
  EXPECT_TRUE(all_close(one[0], Tensor::from_vector(want_y, {B, H, Tq, W}), 1e-6f, 1e-6f));
  EXPECT_TRUE(all_close(one[1], Tensor::from_vector(want_dq, {B, Tq, Dk}), 1e-5f, 1e-5f));
  EXPECT_TRUE(all_close(one[2], Tensor::from_vector(std::vector<float>(dm.begin(), dm.end()), {H, Dk}), 1e-4f, 1e-5f));
}

TEST(CollaborativeQueries, Errors) {
  EXPECT_NE(error_of([] { collaborative_queries(Tensor::zeros({2, 3}), Tensor::zeros({2, 3}), 1.0f); })
                .find("must be [B, Tq, D~k]"),
            std::string::npos);
  EXPECT_NE(error_of([] { collaborative_queries(Tensor::zeros({2, 3, 4}), Tensor::zeros({2, 5}), 1.0f); })
                .find("f32[2, 5]"),
            std::string::npos);
  EXPECT_NE(error_of([] { collaborative_queries(Tensor::zeros({2, 3, 4}, DType::f16), Tensor::zeros({2, 4}), 1.0f); })
                .find("f16"),
            std::string::npos);
}

// matmul folds a's trailing batch dims into its rows when b is shared across
// them; the result and both gradients equal the unfolded path's (a made
// non-contiguous, so it cannot fold) and a broadcast-free reference.
TEST(MatmulSharedOperand, FoldingEqualsTheBroadcastPath) {
  struct Case {
    Shape a, b;
  };
  const Case cases[] = {{{2, 3, 4, 5}, {2, 1, 5, 6}},         // multi-query: shared over heads
                        {{2, 2, 3, 4, 5}, {2, 2, 1, 5, 6}},   // grouped: shared within a group
                        {{2, 3, 4, 5}, {1, 1, 5, 6}},         // shared over everything
                        {{2, 3, 4, 5}, {5, 6}},               // a plain weight
                        {{3, 4, 5}, {1, 5, 6}}};
  uint64_t seed = 70;
  for (const Case& c : cases) {
    Tensor a = random_tensor(c.a, ++seed, -1, 1, true), b = random_tensor(c.b, ++seed, -1, 1, true);
    Shape out_shape = c.a;
    out_shape.back() = c.b.back();
    Tensor g = random_tensor(out_shape, ++seed);
    auto grads = [&](bool contiguous_a) {
      a.zero_grad();
      b.zero_grad();
      // A transposed copy of a, transposed back, holds a's values without being contiguous.
      Tensor av = contiguous_a ? a : a.transpose(-1, -2).contiguous().transpose(-1, -2);
      EXPECT_EQ(av.is_contiguous(), contiguous_a);
      Tensor y = matmul(av, b);
      y.backward(g);
      return std::vector<Tensor>{y.detach(), a.grad(), b.grad()};
    };
    const auto folded = grads(true), plain = grads(false);
    for (size_t k = 0; k < 3; ++k)
      EXPECT_TRUE(all_close(folded[k], plain[k], 1e-5f, 1e-5f)) << "case a" << ::testing::PrintToString(c.a)
                                                                 << " output " << k;
    EXPECT_EQ(folded[0].shape(), out_shape);
    EXPECT_EQ(folded[2].shape(), c.b);
  }
}
