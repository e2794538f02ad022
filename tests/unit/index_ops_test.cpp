// embedding, cross_entropy, masked_fill, concat, split and gather: gradient
// checks, PyTorch comparisons and the error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <string>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "support/check.h"

using namespace cmha;
using namespace cmha::test;

namespace {
using In = const std::vector<Tensor>&;

::testing::AssertionResult mentions(const std::string& msg, std::initializer_list<const char*> facts) {
  for (const char* f : facts)
    if (msg.find(f) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << msg << "' does not mention '" << f << "'";
  return ::testing::AssertionSuccess();
}

Tensor ids_i64(std::vector<int64_t> v, const Shape& s) { return Tensor::from_vector_i64(v, s); }
}  // namespace

// ---------------------------------------------------------------- embedding

TEST(EmbeddingOp, MatchesPyTorch) {
  EXPECT_TRUE(matches_fixture("embedding_repeated", [](auto& in) { return embedding(in.at("w"), in.at("ids")); }));
  EXPECT_TRUE(matches_fixture("embedding_repeated",
                              [](auto& in) { return embedding(in.at("w"), in.at("ids").to(DType::i32)); }));
}

TEST(EmbeddingOp, Gradcheck) {
  Tensor ids = ids_i64({2, 0, 2, 4, 2, 1}, {3, 2});
  EXPECT_TRUE(gradcheck([ids](In x) { return embedding(x[0], ids); }, {random_tensor({5, 3}, 1, -1, 1, true)}));
  // A strided (transposed) table.
  EXPECT_TRUE(gradcheck([ids](In x) { return embedding(x[0].transpose(0, 1), ids); },
                        {random_tensor({3, 5}, 2, -1, 1, true)}));
}

TEST(EmbeddingOp, ParallelBackwardIsDeterministic) {
  // Many positions, few ids: every row of the gradient gathers many terms.
  const int64_t V = 37, D = 64, N = 4096;
  std::vector<int64_t> v(N);
  for (int64_t i = 0; i < N; ++i) v[i] = (i * 7919) % V;
  Tensor ids = ids_i64(v, {N});
  Tensor w = random_tensor({V, D}, 3, -1, 1, true);
  Tensor g = random_tensor({N, D}, 4);
  embedding(w, ids).backward(g);
  Tensor first = w.grad().clone();
  w.zero_grad();
  embedding(w, ids).backward(g);
  EXPECT_TRUE(all_close(w.grad(), first, 0, 0));
  // Reference: the sum in double.
  std::vector<double> ref(V * D, 0.0);
  std::vector<float> gv = g.to_float_vector();
  for (int64_t i = 0; i < N; ++i)
    for (int64_t c = 0; c < D; ++c) ref[v[i] * D + c] += gv[i * D + c];
  EXPECT_TRUE(all_close(w.grad(), Tensor::from_vector(std::vector<float>(ref.begin(), ref.end()), {V, D}), 1e-4f));
}

TEST(EmbeddingOp, Errors) {
  Tensor w = Tensor::zeros({50, 8});
  EXPECT_TRUE(mentions(error_of([&] { embedding(w, ids_i64({1, 2, 3, 4, 57, 6}, {2, 3})); }),
                       {"id 57", "[1, 1]", "vocabulary of 50"}));
  EXPECT_TRUE(mentions(error_of([&] { embedding(w, ids_i64({-1}, {1})); }), {"id -1", "[0]", "50"}));
  EXPECT_TRUE(mentions(error_of([&] { embedding(w, Tensor::zeros({3})); }), {"ids must be i32 or i64", "f32[3]"}));
  EXPECT_TRUE(mentions(error_of([&] { embedding(Tensor::zeros({50}), ids_i64({1}, {1})); }),
                       {"weight must be [V, D]", "f32[50]"}));
}

// ---------------------------------------------------------------- cross_entropy

TEST(CrossEntropyOp, MatchesPyTorch) {
  const std::pair<const char*, Reduction> reductions[] = {
      {"none", Reduction::none}, {"sum", Reduction::sum}, {"mean", Reduction::mean}};
  for (const auto& [name, red] : reductions) {
    for (int ls : {0, 1}) {
      const std::string fixture = std::string("cross_entropy_") + name + "_ls" + std::to_string(ls);
      EXPECT_TRUE(matches_fixture(fixture, [red = red, ls](auto& in) {
        return cross_entropy(in.at("z"), in.at("t"), 0.1f * ls, -100, red);
      }));
    }
  }
  EXPECT_TRUE(matches_fixture("cross_entropy_ignore_class", [](auto& in) {
    return cross_entropy(in.at("z"), in.at("t").to(DType::i32), 0.1f, 2);
  }));
  // [B, T, C] logits with [B, T] targets.
  EXPECT_TRUE(matches_fixture("cross_entropy_btc_none", [](auto& in) {
    return cross_entropy(in.at("z"), in.at("t"), 0.1f, -100, Reduction::none);
  }));
  EXPECT_TRUE(matches_fixture("cross_entropy_btc_mean",
                              [](auto& in) { return cross_entropy(in.at("z"), in.at("t"), 0.1f); }));
}

TEST(CrossEntropyOp, Gradcheck) {
  Tensor t = ids_i64({1, -100, 4, 0}, {4});
  for (float eps : {0.0f, 0.1f})
    for (Reduction red : {Reduction::none, Reduction::sum, Reduction::mean})
      EXPECT_TRUE(gradcheck([&](In x) { return cross_entropy(x[0], t, eps, -100, red); },
                            {random_tensor({4, 5}, 5, -2, 2, true)}));
  Tensor t3 = ids_i64({0, 2, 1, 2, -100, 0}, {2, 3});
  EXPECT_TRUE(gradcheck([&](In x) { return cross_entropy(x[0], t3, 0.2f); }, {random_tensor({2, 3, 3}, 6, -2, 2, true)}));
}

TEST(CrossEntropyOp, ReductionsAgreeOnAParallelBatch) {
  // 512 × 100 logits take the OpenMP path; mean must equal mean(none), gradients too.
  std::vector<int64_t> tv(512);
  for (int64_t i = 0; i < 512; ++i) tv[i] = i % 9 == 0 ? -100 : (i * 37) % 100;
  Tensor t = ids_i64(tv, {512});
  Tensor a = random_tensor({512, 100}, 20, -3, 3, true), b = random_tensor({512, 100}, 20, -3, 3, true);
  Tensor fused = cross_entropy(a, t, 0.1f);
  std::vector<float> rows = cross_entropy(b, t, 0.1f, -100, Reduction::none).to_float_vector();
  double total = 0;
  int64_t kept = 0;
  for (int64_t i = 0; i < 512; ++i) {
    total += rows[i];
    kept += tv[i] != -100;
  }
  EXPECT_NEAR(fused.item(), total / kept, 1e-5);
  fused.backward();
  mul_scalar(cross_entropy(b, t, 0.1f, -100, Reduction::none), 1.0f / kept).backward(Tensor::ones({512}));
  EXPECT_TRUE(all_close(a.grad(), b.grad(), 1e-7f, 1e-5f));
}

TEST(CrossEntropyOp, LargeLogitsStayFinite) {
  Tensor z = Tensor::from_vector({1000.0f, 0.0f, -1000.0f, 500.0f, 501.0f, 502.0f}, {2, 3});
  Tensor loss = cross_entropy(z, ids_i64({0, 1}, {2}), 0.0f, -100, Reduction::none);
  std::vector<float> l = loss.to_float_vector();
  EXPECT_NEAR(l[0], 0.0f, 1e-6f);
  EXPECT_NEAR(l[1], 1.4076059f, 1e-5f);  // log(1 + e + e²) - 1
}

// PyTorch returns nan for a mean over zero non-ignored rows; cmha returns 0
// (and a zero gradient) so a batch that is all padding does not poison training.
TEST(CrossEntropyOp, MeanOverOnlyIgnoredRowsIsZero) {
  Tensor z = random_tensor({3, 4}, 7, -1, 1, true);
  Tensor loss = cross_entropy(z, ids_i64({-100, -100, -100}, {3}), 0.1f);
  EXPECT_EQ(loss.item(), 0.0f);
  loss.backward();
  EXPECT_TRUE(all_close(z.grad(), Tensor::zeros({3, 4}), 0, 0));
  EXPECT_EQ(cross_entropy(z, ids_i64({-100, -100, -100}, {3}), 0.0f, -100, Reduction::sum).item(), 0.0f);
}

TEST(CrossEntropyOp, Errors) {
  Tensor z = Tensor::zeros({4, 5});
  EXPECT_TRUE(mentions(error_of([&] { cross_entropy(z, ids_i64({0, 1, 7, 2}, {4})); }),
                       {"target 7", "row 2", "5 classes"}));
  EXPECT_TRUE(mentions(error_of([&] { cross_entropy(z, ids_i64({0, -1, 1, 2}, {4})); }), {"target -1", "row 1"}));
  EXPECT_TRUE(mentions(error_of([&] { cross_entropy(z, ids_i64({0, 1, 2}, {3})); }),
                       {"i64[3]", "f32[4, 5]", "expected target shape [4]"}));
  EXPECT_TRUE(mentions(error_of([&] { cross_entropy(z, Tensor::zeros({4})); }), {"i32 or i64", "f32[4]"}));
  EXPECT_TRUE(mentions(error_of([&] { cross_entropy(z, ids_i64({0, 1, 2, 3}, {4}), 1.5f); }),
                       {"label_smoothing", "1.5"}));
  EXPECT_TRUE(mentions(error_of([&] { cross_entropy(Tensor::zeros({4, 0}), ids_i64({0, 1, 2, 3}, {4})); }),
                       {"C > 0", "f32[4, 0]"}));
}

// ---------------------------------------------------------------- masked_fill

TEST(MaskedFillOp, MatchesPyTorch) {
  EXPECT_TRUE(matches_fixture("masked_fill_broadcast",
                              [](auto& in) { return masked_fill(in.at("x"), in.at("mask"), -1.5f); }));
}

TEST(MaskedFillOp, Gradcheck) {
  Tensor mask = Tensor::from_vector({1, 0, 0, 1}, {1, 4}).to(DType::b8);  // [1, 4] broadcast over rows
  EXPECT_TRUE(gradcheck([mask](In x) { return masked_fill(x[0], mask, 3.0f); }, {random_tensor({3, 4}, 8, -1, 1, true)}));
  // Strided x and a mask with a broadcast middle dim.
  Tensor mask3 = Tensor::from_vector({0, 1, 1, 0, 1, 0}, {2, 1, 3}).to(DType::b8);
  EXPECT_TRUE(gradcheck([mask3](In x) { return masked_fill(x[0].transpose(1, 2), mask3, -2.0f); },
                        {random_tensor({2, 3, 2}, 9, -1, 1, true)}));
}

TEST(MaskedFillOp, OtherDtypes) {
  Tensor x = Tensor::from_vector_i64({1, 2, 3, 4}, {2, 2});
  Tensor mask = Tensor::from_vector({0, 1}, {2}).to(DType::b8);
  EXPECT_EQ(masked_fill(x, mask, -7.0f).to_i64_vector(), (std::vector<int64_t>{1, -7, 3, -7}));
  Tensor h = masked_fill(Tensor::ones({2, 2}, DType::bf16), mask, -1e4f);
  EXPECT_EQ(h.dtype(), DType::bf16);
  EXPECT_EQ(h.to_float_vector(), (std::vector<float>{1.0f, -9984.0f, 1.0f, -9984.0f}));  // -1e4 in bf16
}

TEST(MaskedFillOp, Errors) {
  Tensor x = Tensor::zeros({2, 3});
  EXPECT_TRUE(mentions(error_of([&] { masked_fill(x, Tensor::zeros({2, 3}), 0.0f); }), {"mask must be b8", "f32[2, 3]"}));
  EXPECT_TRUE(mentions(error_of([&] { masked_fill(x, Tensor::zeros({2, 1}, DType::b8).expand({2, 2}), 0.0f); }),
                       {"b8[2, 2]", "does not broadcast", "f32[2, 3]"}));
  EXPECT_TRUE(mentions(error_of([&] { masked_fill(x, Tensor::zeros({1, 2, 3}, DType::b8), 0.0f); }),
                       {"b8[1, 2, 3]", "f32[2, 3]"}));
}

// ---------------------------------------------------------------- concat

TEST(ConcatOp, MatchesPyTorch) {
  EXPECT_TRUE(matches_fixture("concat_dim0",
                              [](auto& in) { return concat({in.at("a"), in.at("b"), in.at("c")}, 0); }));
  EXPECT_TRUE(matches_fixture("concat_dim1",
                              [](auto& in) { return concat({in.at("a"), in.at("b"), in.at("c")}, -2); }));
}

TEST(ConcatOp, Gradcheck) {
  EXPECT_TRUE(gradcheck([](In x) { return concat({x[0], x[1].transpose(0, 1), x[2]}, 1); },
                        {random_tensor({3, 2}, 10, -1, 1, true), random_tensor({1, 3}, 11, -1, 1, true),
                         random_tensor({3, 4}, 12, -1, 1, true)}));
  // Only some inputs need a gradient.
  Tensor fixed = random_tensor({2, 2}, 13);
  EXPECT_TRUE(gradcheck([fixed](In x) { return concat({fixed, x[0]}, 0); }, {random_tensor({3, 2}, 14, -1, 1, true)}));
}

TEST(ConcatOp, IntegerTensors) {
  Tensor a = Tensor::from_vector_i32({1, 2}, {2}), b = Tensor::from_vector_i32({3}, {1});
  Tensor c = concat({a, b}, 0);
  EXPECT_EQ(c.dtype(), DType::i32);
  EXPECT_EQ(c.to_i64_vector(), (std::vector<int64_t>{1, 2, 3}));
}

TEST(ConcatOp, Errors) {
  Tensor a = Tensor::zeros({2, 3});
  EXPECT_TRUE(mentions(error_of([&] { concat({a, Tensor::zeros({2, 1}), Tensor::zeros({3, 3})}, 1); }),
                       {"tensor 2", "f32[3, 3]", "tensor 0", "f32[2, 3]", "except along dim 1"}));
  EXPECT_TRUE(mentions(error_of([&] { concat({a, Tensor::zeros({2, 3, 1})}, 0); }), {"tensor 1", "f32[2, 3, 1]"}));
  EXPECT_TRUE(mentions(error_of([&] { concat({a, Tensor::zeros({2, 3}, DType::i64)}, 0); }),
                       {"tensor 1", "i64[2, 3]", "dtype"}));
  EXPECT_TRUE(mentions(error_of([&] { concat({}, 0); }), {"at least one"}));
  EXPECT_TRUE(mentions(error_of([&] { concat({a}, 2); }), {"dim 2", "f32[2, 3]"}));
}

// ---------------------------------------------------------------- split

TEST(SplitOp, MatchesPyTorch) {
  EXPECT_TRUE(matches_fixture("split_uneven", [](auto& in) {
    std::vector<Tensor> p = split(in.at("x"), {1, 3, 2}, 1);
    return concat({p[0].reshape({-1}), p[1].reshape({-1}) * 2.0f, p[2].reshape({-1}) * 3.0f}, 0);
  }));
}

TEST(SplitOp, Gradcheck) {
  EXPECT_TRUE(gradcheck(
      [](In x) {
        std::vector<Tensor> p = split(x[0], {2, 0, 1}, -1);
        return concat({p[0] * 2.0f, p[2], p[1]}, -1);
      },
      {random_tensor({2, 3}, 15, -1, 1, true)}));
}

TEST(SplitOp, PiecesAreViews) {
  Tensor x = Tensor::arange(6).reshape({2, 3});
  std::vector<Tensor> p = split(x, {1, 1}, 0);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1].shape(), (Shape{1, 3}));
  EXPECT_EQ(p[1].raw_data(), static_cast<float*>(x.raw_data()) + 3);
}

TEST(SplitOp, Errors) {
  Tensor x = Tensor::zeros({3, 5});
  EXPECT_TRUE(mentions(error_of([&] { split(x, {2, 2}, 1); }), {"[2, 2]", "sum to 4", "dim 1", "f32[3, 5]", "size 5"}));
  EXPECT_TRUE(mentions(error_of([&] { split(x, {4, -1}, 0); }), {"negative size -1"}));
}

// ---------------------------------------------------------------- gather

TEST(GatherOp, MatchesPyTorch) {
  EXPECT_TRUE(matches_fixture("gather_dim0", [](auto& in) { return gather(in.at("x"), 0, in.at("index")); }));
  EXPECT_TRUE(matches_fixture("gather_dim_last", [](auto& in) { return gather(in.at("x"), -1, in.at("index")); }));
  EXPECT_TRUE(matches_fixture("gather_dim_last",
                              [](auto& in) { return gather(in.at("x"), 2, in.at("index").to(DType::i32)); }));
}

TEST(GatherOp, Gradcheck) {
  Tensor index = ids_i64({1, 1, 0, 2, 0, 0, 2, 1}, {2, 4});
  EXPECT_TRUE(gradcheck([index](In x) { return gather(x[0], 1, index); }, {random_tensor({3, 3}, 16, -1, 1, true)}));
  // Strided x, gathering along dim 0.
  Tensor index0 = ids_i64({2, 0, 2, 1, 1, 1}, {3, 2});
  EXPECT_TRUE(gradcheck([index0](In x) { return gather(x[0].transpose(0, 1), 0, index0); },
                        {random_tensor({2, 3}, 17, -1, 1, true)}));
}

TEST(GatherOp, ParallelBackwardIsDeterministic) {
  // 256 lines of 512 reads each into 8 slots: heavy collisions within lines.
  const int64_t R = 256, X = 8, K = 512;
  std::vector<int64_t> v(R * K);
  for (int64_t i = 0; i < R * K; ++i) v[i] = (i * 31 + i / 7) % X;
  Tensor index = ids_i64(v, {R, K});
  Tensor x = random_tensor({R, X}, 18, -1, 1, true);
  Tensor g = random_tensor({R, K}, 19);
  gather(x, 1, index).backward(g);
  Tensor first = x.grad().clone();
  x.zero_grad();
  gather(x, 1, index).backward(g);
  EXPECT_TRUE(all_close(x.grad(), first, 0, 0));
  std::vector<double> ref(R * X, 0.0);
  std::vector<float> gv = g.to_float_vector();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t k = 0; k < K; ++k) ref[r * X + v[r * K + k]] += gv[r * K + k];
  EXPECT_TRUE(all_close(x.grad(), Tensor::from_vector(std::vector<float>(ref.begin(), ref.end()), {R, X}), 1e-4f));
}

TEST(GatherOp, Errors) {
  Tensor x = Tensor::zeros({2, 3});
  EXPECT_TRUE(mentions(error_of([&] { gather(x, 1, ids_i64({0, 1, 5, 2}, {2, 2})); }),
                       {"index value 5", "[1, 0]", "dim 1", "size 3"}));
  EXPECT_TRUE(mentions(error_of([&] { gather(x, 0, ids_i64({0, -1}, {1, 2})); }), {"index value -1", "[0, 1]"}));
  EXPECT_TRUE(mentions(error_of([&] { gather(x, 1, ids_i64({0, 0, 0}, {3, 1})); }),
                       {"i64[3, 1]", "f32[2, 3]", "at dim 0", "only dim 1"}));
  EXPECT_TRUE(mentions(error_of([&] { gather(x, 1, ids_i64({0, 0}, {2})); }), {"i64[2]", "as many dims"}));
  EXPECT_TRUE(mentions(error_of([&] { gather(x, 1, Tensor::zeros({2, 1})); }), {"i32 or i64", "f32[2, 1]"}));
  EXPECT_TRUE(mentions(error_of([&] { gather(x, 2, ids_i64({0}, {1, 1})); }), {"dim 2"}));
}
