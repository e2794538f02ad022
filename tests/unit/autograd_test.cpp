// The engine: accumulation, ordering, hooks, freeing, no-grad mode, errors.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "support/check.h"

using namespace cmha;
using cmha::test::all_close;

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
