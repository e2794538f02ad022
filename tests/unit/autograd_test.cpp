// The engine: accumulation, ordering, hooks, freeing, no-grad mode, errors.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "support/check.h"

using namespace cmha;
using cmha::test::all_close;
using cmha::test::error_of;
using cmha::test::random_tensor;

TEST(Autograd, DiamondGraphSumsBothPaths) {
  Tensor x = Tensor::from_vector({1, 2, 3}, {3});
  x.set_requires_grad(true);
  Tensor a = mul(x, x);          // x²
  Tensor b = mul_scalar(x, 3);   // 3x
  Tensor y = sum(add(a, b));     // Σ x² + 3x
  y.backward();
  EXPECT_EQ(x.grad().to_float_vector(), (std::vector<float>{5, 7, 9}));  // 2x + 3
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = Tensor::from_vector({1, 2}, {2});
  x.set_requires_grad(true);
  sum(mul_scalar(x, 2)).backward();
  sum(mul_scalar(x, 5)).backward();
  EXPECT_EQ(x.grad().to_float_vector(), (std::vector<float>{7, 7}));
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autograd, ReadyHookFiresOnceWhenGradientIsFinal) {
  Tensor w = Tensor::from_vector({1, 2}, {2});
  w.set_requires_grad(true);
  std::vector<float> seen;
  int calls = 0;
  w.register_grad_ready_hook([&](Tensor& p) {
    ++calls;
    seen = p.grad().to_float_vector();
  });
  // w is used three times; the hook must see the sum of all three.
  Tensor y = sum(add(add(w, mul_scalar(w, 2)), mul(w, w)));
  y.backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<float>{5, 7}));  // 1 + 2 + 2w
}

TEST(Autograd, HooksFireInReverseOrderOfUse) {
  // Data-parallel training all-reduces buckets in the order gradients become
  // ready: the parameter used last must be ready first.
  Tensor w1 = cmha::test::random_tensor({4, 4}, 1, -1, 1, true);
  Tensor w2 = cmha::test::random_tensor({4, 4}, 2, -1, 1, true);
  Tensor w3 = cmha::test::random_tensor({4, 4}, 3, -1, 1, true);
  std::vector<int> order;
  w1.register_grad_ready_hook([&](Tensor&) { order.push_back(1); });
  w2.register_grad_ready_hook([&](Tensor&) { order.push_back(2); });
  w3.register_grad_ready_hook([&](Tensor&) { order.push_back(3); });
  Tensor x = cmha::test::random_tensor({2, 4}, 4);
  Tensor h = tanh(linear(tanh(linear(tanh(linear(x, w1)), w2)), w3));
  sum(h).backward();
  EXPECT_EQ(order, (std::vector<int>{3, 2, 1}));
}

TEST(Autograd, GraphIsFreedAfterBackward) {
  Tensor x = Tensor::from_vector({1, 2}, {2});
  x.set_requires_grad(true);
  Tensor big = mul(x, x);
  std::weak_ptr<TensorImpl> saved_input = x.impl_ptr();
  Tensor y = sum(big);
  y.backward();
  EXPECT_TRUE(big.grad_fn()->inputs.empty());
  EXPECT_FALSE(static_cast<bool>(big.grad_fn()->backward));
  try {
    y.backward();
    FAIL() << "second backward through a freed graph must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already freed"), std::string::npos) << e.what();
  }
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  Tensor x = Tensor::from_vector({1, 2}, {2});
  x.set_requires_grad(true);
  {
    autograd::NoGradGuard guard;
    Tensor y = mul(x, x);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
  }
  EXPECT_TRUE(autograd::grad_enabled());
  EXPECT_TRUE(mul(x, x).requires_grad());
}

TEST(Autograd, OnlyInputsThatNeedGradientsGetThem) {
  Tensor x = Tensor::from_vector({1, 2}, {2});
  Tensor w = Tensor::from_vector({3, 4}, {2});
  w.set_requires_grad(true);
  sum(mul(x, w)).backward();
  EXPECT_FALSE(x.grad().defined());
  EXPECT_EQ(w.grad().to_float_vector(), (std::vector<float>{1, 2}));
}

TEST(Autograd, LeafGradientsDoNotAliasOtherBuffers) {
  // add's backward hands the same gradient to both inputs; updating one .grad
  // in place (as clipping does) must not change the other.
  Tensor a = Tensor::from_vector({1, 2}, {2}), b = Tensor::from_vector({3, 4}, {2});
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  Tensor g = Tensor::from_vector({1, 1}, {2});
  add(a, b).backward(g);
  a.grad().fill_(0.0);
  EXPECT_EQ(b.grad().to_float_vector(), (std::vector<float>{1, 1}));
  EXPECT_EQ(g.to_float_vector(), (std::vector<float>{1, 1}));
}

TEST(Autograd, ErrorsAreClear) {
  Tensor x = Tensor::from_vector({1, 2}, {2});
  try {
    sum(x).backward();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not require grad"), std::string::npos) << e.what();
  }
  x.set_requires_grad(true);
  Tensor y = mul(x, x);
  EXPECT_THROW(y.backward(), Error);                           // implicit grad needs one element
  EXPECT_THROW(y.backward(Tensor::ones({3})), Error);          // wrong gradient shape
  EXPECT_THROW(y.set_requires_grad(false), Error);             // not a leaf
}

TEST(Autograd, DtypeConversionIsDifferentiable) {
  Tensor x = cmha::test::random_tensor({3, 4}, 5, -1, 1, true);
  Tensor y = sum(mul(x.to(DType::bf16).to(DType::f32), x));
  y.backward();
  EXPECT_TRUE(all_close(x.grad(), mul_scalar(x.detach(), 2), 0.02f, 0.02f));
}

// A strided tensor views as any shape that splits or merges only dims laid
// out one after the other: a slice of the last dim splits into heads; a
// transpose cannot merge its swapped dims (the error says to reshape).
TEST(Autograd, StridedViewsSplitButDoNotMergeAcrossGaps) {
  Tensor x = random_tensor({2, 3, 12}, 120, -1, 1, true);
  Tensor piece = x.slice(2, 4, 8);           // [2, 3, 4], strides (36, 12, 1)
  Tensor heads = piece.view({2, 3, 2, 2});  // no copy
  EXPECT_EQ(heads.strides(), (Shape{36, 12, 2, 1}));
  EXPECT_EQ(heads.to_float_vector(), piece.contiguous().view({2, 3, 2, 2}).to_float_vector());
  Tensor merged = x.slice(2, 0, 6).view({6, 6});  // rows of 6 out of 12: merging (2, 3) is fine
  EXPECT_EQ(merged.strides(), (Shape{12, 1}));
  EXPECT_NE(error_of([&] { x.transpose(1, 2).view({2, 36}); }).find("use reshape()"), std::string::npos);
  EXPECT_NE(error_of([&] { piece.view({2, 12}); }).find("cannot be viewed as [2, 12]"), std::string::npos);
  // The view's gradient lands on the slice's elements only.
  (heads * 3.0f).backward(Tensor::ones({2, 3, 2, 2}));
  std::vector<float> want(72, 0.0f);
  for (int i = 0; i < 6; ++i)
    for (int j = 4; j < 8; ++j) want[i * 12 + j] = 3.0f;
  EXPECT_EQ(x.grad().to_float_vector(), want);
}

// The pieces of a split tensor add their gradients into one full-size
// gradient in place (Node::accumulate); overlapping and strided slices and a
// piece that also reaches the tensor another way must sum as the plain rule.
TEST(Autograd, SlicesOfOneTensorSumTheirGradientsInPlace) {
  Tensor x = random_tensor({4, 10}, 121, -1, 1, true);
  Tensor g1 = random_tensor({4, 3}, 122), g2 = random_tensor({4, 5}, 123), g3 = random_tensor({4, 3}, 124),
         g4 = random_tensor({4, 10}, 125);
  auto loss = [&](const Tensor& t) {
    Tensor y = t * 2.0f;  // a node between x and the slices, so they meet at a node's gradient
    return add(add(sum(mul(y.slice(1, 0, 3), g1)), sum(mul(y.slice(1, 2, 7), g2))),
               add(sum(mul(y.slice(1, 1, 10, 4), g3)), sum(mul(y, g4))));
  };
  loss(x).backward();
  const std::vector<float> got = x.grad().to_float_vector();
  std::vector<float> want(40, 0.0f);
  const std::vector<float> a = g1.to_float_vector(), b = g2.to_float_vector(), c = g3.to_float_vector(),
                           d = g4.to_float_vector();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 10; ++j) {
      float v = d[i * 10 + j];
      if (j < 3) v += a[i * 3 + j];
      if (j >= 2 && j < 7) v += b[i * 5 + j - 2];
      if (j % 4 == 1) v += c[i * 3 + j / 4];
      want[i * 10 + j] = 2.0f * v;
    }
  for (int k = 0; k < 40; ++k) EXPECT_NEAR(got[k], want[k], 1e-5f) << k;
  // Slices of a leaf directly.
  Tensor z = random_tensor({6}, 126, -1, 1, true);
  add(sum(z.slice(0, 0, 4)), sum(z.slice(0, 3, 6) * 5.0f)).backward();
  EXPECT_EQ(z.grad().to_float_vector(), (std::vector<float>{1, 1, 1, 6, 5, 5}));
}
