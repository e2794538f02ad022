// matmul, linear, element-wise arithmetic, reductions and views: gradient
// checks and PyTorch comparisons.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/cpu/onednn.h"
#include "support/check.h"

using namespace cmha;
using namespace cmha::test;

namespace {
using In = const std::vector<Tensor>&;
}

TEST(MatmulOp, MatchesPyTorch) {
  EXPECT_TRUE(matches_fixture("matmul_2d", [](auto& in) { return matmul(in.at("a"), in.at("b")); }));
  EXPECT_TRUE(matches_fixture("matmul_batched_broadcast", [](auto& in) { return matmul(in.at("a"), in.at("b")); }));
  EXPECT_TRUE(matches_fixture("matmul_transposed", [](auto& in) {
    return matmul(in.at("a").transpose(0, 1), in.at("b").transpose(0, 1));
  }));
}

TEST(MatmulOp, Gradcheck) {
  EXPECT_TRUE(gradcheck([](In x) { return matmul(x[0], x[1]); },
                        {random_tensor({2, 3, 4}, 1, -1, 1, true), random_tensor({4, 5}, 2, -1, 1, true)}));
  EXPECT_TRUE(gradcheck([](In x) { return matmul(x[0].transpose(0, 1), x[1]); },
                        {random_tensor({4, 3}, 3, -1, 1, true), random_tensor({4, 2}, 4, -1, 1, true)}));
}

TEST(MatmulOp, Bf16InputsAccumulateInF32) {
  Tensor a = random_tensor({16, 64}, 5), b = random_tensor({64, 8}, 6);
  Tensor ref = matmul(a, b);
  Tensor c = matmul(a.to(DType::bf16), b.to(DType::bf16));
  EXPECT_EQ(c.dtype(), DType::bf16);
  EXPECT_TRUE(all_close(c.to(DType::f32), ref, 0.1f, 0.02f));
}

TEST(MatmulOp, PrimitivesAreCachedByShape) {
  Tensor a = random_tensor({7, 9}, 1), b = random_tensor({9, 11}, 2);
  matmul(a, b);
  const size_t created = cpu::matmul_primitives_created();
  for (int i = 0; i < 3; ++i) matmul(a, b);
  EXPECT_EQ(cpu::matmul_primitives_created(), created);
  matmul(random_tensor({7, 10}, 3), random_tensor({10, 11}, 4));
  EXPECT_EQ(cpu::matmul_primitives_created(), created + 1);
}

TEST(MatmulOp, ThePrimitiveCacheIsBounded) {
  // 600 geometries (translation batches change shape all the time): the
  // cache keeps the 512 most recent; an evicted shape is rebuilt, a recent one not.
  const Tensor b = random_tensor({3, 2}, 5);
  for (int64_t m = 1; m <= 600; ++m) matmul(Tensor::zeros({m, 3}), b);
  EXPECT_LE(cpu::matmul_primitives_cached(), 512u);
  const size_t created = cpu::matmul_primitives_created();
  matmul(Tensor::zeros({600, 3}), b);
  EXPECT_EQ(cpu::matmul_primitives_created(), created);
  matmul(Tensor::zeros({1, 3}), b);
  EXPECT_EQ(cpu::matmul_primitives_created(), created + 1);
}

TEST(MatmulOp, ErrorsNameTheShapes) {
  try {
    matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f32[2, 3]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("f32[4, 5]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(matmul(Tensor::zeros({3}), Tensor::zeros({3, 2})), Error);
  EXPECT_THROW(matmul(Tensor::zeros({2, 3}), Tensor::zeros({3, 2}, DType::i64)), Error);
}

TEST(LinearOp, MatchesPyTorch) {
  EXPECT_TRUE(matches_fixture("linear_bias", [](auto& in) { return linear(in.at("x"), in.at("w"), in.at("b")); }));
  EXPECT_TRUE(matches_fixture("linear_nobias", [](auto& in) { return linear(in.at("x"), in.at("w")); }));
}

TEST(LinearOp, Gradcheck) {
  EXPECT_TRUE(gradcheck([](In x) { return linear(x[0], x[1], x[2]); },
                        {random_tensor({2, 3, 4}, 1, -1, 1, true), random_tensor({5, 4}, 2, -1, 1, true),
                         random_tensor({5}, 3, -1, 1, true)}));
}

TEST(LinearOp, RejectsMismatchedWeight) {
  EXPECT_THROW(linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})), Error);
  EXPECT_THROW(linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 3}), Tensor::zeros({5})), Error);
}

TEST(ElementwiseOps, MatchPyTorch) {
  EXPECT_TRUE(matches_fixture("add_broadcast", [](auto& in) { return add(in.at("a"), in.at("b")); }));
  EXPECT_TRUE(matches_fixture("sub_broadcast", [](auto& in) { return sub(in.at("a"), in.at("b")); }));
  EXPECT_TRUE(matches_fixture("mul_broadcast", [](auto& in) { return mul(in.at("a"), in.at("b")); }));
  EXPECT_TRUE(matches_fixture("div_broadcast", [](auto& in) { return div(in.at("a"), in.at("b")); }));
  EXPECT_TRUE(matches_fixture("exp", [](auto& in) { return exp(in.at("a")); }));
  EXPECT_TRUE(matches_fixture("log", [](auto& in) { return log(in.at("a")); }));
  EXPECT_TRUE(matches_fixture("sqrt", [](auto& in) { return sqrt(in.at("a")); }));
  EXPECT_TRUE(matches_fixture("tanh", [](auto& in) { return tanh(in.at("a")); }));
  EXPECT_TRUE(matches_fixture("pow", [](auto& in) { return pow_scalar(in.at("a"), 2.5f); }));
}

TEST(ElementwiseOps, Gradcheck) {
  auto a = [] { return random_tensor({3, 1, 4}, 11, -1, 1, true); };
  auto b = [] { return random_tensor({2, 4}, 12, 0.5f, 1.5f, true); };
  EXPECT_TRUE(gradcheck([](In x) { return add(x[0], x[1]); }, {a(), b()}));
  EXPECT_TRUE(gradcheck([](In x) { return sub(x[0], x[1]); }, {a(), b()}));
  EXPECT_TRUE(gradcheck([](In x) { return mul(x[0], x[1]); }, {a(), b()}));
  EXPECT_TRUE(gradcheck([](In x) { return div(x[0], x[1]); }, {a(), b()}));
  EXPECT_TRUE(gradcheck([](In x) { return mul_scalar(add_scalar(x[0], 2.0f), -3.0f); }, {a()}));
  EXPECT_TRUE(gradcheck([](In x) { return neg(exp(x[0])); }, {a()}));
  EXPECT_TRUE(gradcheck([](In x) { return log(x[0]); }, {b()}));
  EXPECT_TRUE(gradcheck([](In x) { return sqrt(x[0]); }, {b()}));
  EXPECT_TRUE(gradcheck([](In x) { return pow_scalar(x[0], 3.0f); }, {b()}));
  EXPECT_TRUE(gradcheck([](In x) { return tanh(x[0]); }, {a()}));
}

TEST(ElementwiseOps, StridedOperands) {
  Tensor a = random_tensor({4, 6}, 1), b = random_tensor({6, 4}, 2);
  Tensor got = add(a, b.transpose(0, 1));
  Tensor want = add(a, b.transpose(0, 1).contiguous());
  EXPECT_TRUE(all_close(got, want, 0, 0));
}

TEST(ElementwiseOps, BroadcastErrorNamesShapes) {
  try {
    add(Tensor::zeros({2, 3}), Tensor::zeros({4}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "add: shapes [2, 3] and [4] cannot be broadcast together");
  }
  EXPECT_THROW(mul(Tensor::zeros({2}), Tensor::zeros({2}, DType::i32)), Error);
}

TEST(Reductions, MatchPyTorch) {
  EXPECT_TRUE(matches_fixture("sum_dims", [](auto& in) { return sum(in.at("x"), {0, 2}, true); }));
  EXPECT_TRUE(matches_fixture("sum_leading", [](auto& in) { return sum(in.at("x"), {0}); }));
  EXPECT_TRUE(matches_fixture("mean_last", [](auto& in) { return mean(in.at("x"), {-1}); }));
  EXPECT_TRUE(matches_fixture("max_dim1", [](auto& in) { return max(in.at("x"), 1); }));
}

TEST(Reductions, Gradcheck) {
  auto x = [] { return random_tensor({3, 4, 5}, 21, -1, 1, true); };
  EXPECT_TRUE(gradcheck([](In t) { return sum(t[0], {1}); }, {x()}));
  EXPECT_TRUE(gradcheck([](In t) { return sum(t[0], {0, 2}, true); }, {x()}));
  EXPECT_TRUE(gradcheck([](In t) { return sum(t[0]); }, {x()}));
  EXPECT_TRUE(gradcheck([](In t) { return mean(t[0], {2}); }, {x()}));
  EXPECT_TRUE(gradcheck([](In t) { return max(t[0], 0); }, {x()}));
  EXPECT_TRUE(gradcheck([](In t) { return max(t[0], -1, true); }, {x()}));
}

TEST(Reductions, ArgmaxAndErrors) {
  Tensor x = Tensor::from_vector({1, 5, 2, 7, 0, 3}, {2, 3});
  EXPECT_EQ(argmax(x, 1).to_i64_vector(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(argmax(x, 0).to_i64_vector(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_THROW(sum(x, {2}), Error);
  EXPECT_THROW(sum(x, {1, 1}), Error);
}

// The first maximal element wins ties; a NaN is the maximum (the first NaN
// wins); -inf rows and signed zeros keep their first element. Long rows take
// the vectorised path: the answer must not depend on the position.
TEST(Reductions, MaxPicksTheFirstMaximumAndNaN) {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> rows = {3, 7, 7, 1,  2, nan, 9, nan,  -inf, -inf, -inf, -inf,  -0.0f, 0.0f, -1, -2};
  Tensor x = Tensor::from_vector(rows, {4, 4});
  // (Compared one by one: g++ 12.2 with -march=native on AVX-512 builds a
  // local std::vector<int64_t>{1, 1, 0, 0} as {1, 1, 1, 1}: see the note of
  // this change.)
  const std::vector<int64_t> got = argmax(x, 1).to_i64_vector();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], 1);  // the first of two 7s
  EXPECT_EQ(got[1], 1);  // the first NaN
  EXPECT_EQ(got[2], 0);  // all -inf
  EXPECT_EQ(got[3], 0);  // -0 before +0
  for (int64_t at : {int64_t{0}, int64_t{17}, int64_t{998}, int64_t{999}}) {
    std::vector<float> v(1000, -5.0f);
    v[at] = 4.0f;
    v[(at + 500) % 1000] = 4.0f;  // a later tie
    Tensor row = Tensor::from_vector(v, {1, 1000});
    EXPECT_EQ(argmax(row, 1).to_i64_vector()[0], std::min(at, (at + 500) % 1000));
    v[(at + 300) % 1000] = nan;
    EXPECT_EQ(argmax(Tensor::from_vector(v, {1, 1000}), 1).to_i64_vector()[0], (at + 300) % 1000);
  }
}

TEST(Views, MatchPyTorch) {
  EXPECT_TRUE(matches_fixture("views", [](auto& in) {
    return mul_scalar(in.at("x").permute({2, 0, 1}).slice(0, 1, 3).reshape({2, 6}).transpose(0, 1).unsqueeze(0).expand({3, 6, 2}), 1.0f);
  }));
}

TEST(Views, Gradcheck) {
  auto x = [] { return random_tensor({2, 3, 4}, 31, -1, 1, true); };
  EXPECT_TRUE(gradcheck([](In t) { return t[0].transpose(0, 2).reshape({4, 6}); }, {x()}));
  EXPECT_TRUE(gradcheck([](In t) { return t[0].slice(2, 0, 4, 2).select(1, 1); }, {x()}));
  EXPECT_TRUE(gradcheck([](In t) { return t[0].slice(0, 1, 2).expand({5, 3, 4}); }, {x()}));
  EXPECT_TRUE(gradcheck([](In t) { return t[0].unsqueeze(1).squeeze(1).flatten(); }, {x()}));
}

// Under autocast the activation is bf16; the parameters' gradients stay f32,
// and x's comes back in x's dtype.
TEST(LinearOp, Bf16AutocastKeepsF32WeightsAndGradients) {
  Tensor x = random_tensor({6, 32}, 1, -1, 1, true), w = random_tensor({8, 32}, 2, -1, 1, true),
         b = random_tensor({8}, 3, -1, 1, true);
  Tensor g = random_tensor({6, 8}, 4);
  linear(x, w, b).backward(g);
  const Tensor ref = linear(x.detach(), w.detach(), b.detach());
  const Tensor dx = x.grad(), dw = w.grad(), db = b.grad();
  x.zero_grad();
  w.zero_grad();
  b.zero_grad();
  Tensor y;
  {
    autograd::AutocastGuard autocast(true);
    y = linear(x, w, b);
  }
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_TRUE(all_close(y.to(DType::f32), ref, 0.05f, 0.02f));  // bf16 inputs: ~3 significant digits
  EXPECT_FALSE(all_close(y.to(DType::f32), ref, 1e-6f, 1e-6f)) << "autocast did not change the arithmetic";
  EXPECT_THROW(y.backward(g), Error);  // an f32 gradient for a bf16 tensor is named, not cast
  y.backward(g.to(DType::bf16));
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  EXPECT_EQ(b.grad().dtype(), DType::f32);
  EXPECT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_TRUE(all_close(x.grad(), dx, 0.05f, 0.02f));
  EXPECT_TRUE(all_close(w.grad(), dw, 0.05f, 0.02f));
  EXPECT_TRUE(all_close(b.grad(), db, 0.01f, 0.01f));  // the bf16 gradient summed in f32
  EXPECT_FALSE(autograd::autocast_bf16());
}
