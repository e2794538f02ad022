// Autograd's saved-tensor version check (autograd/engine.h, SavedTensor): an
// in-place write, through the Tensor API, to a tensor an op saved for its
// backward makes that backward refuse with an error naming the op; writes the
// backward does not depend on, and normal training, go through.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "nn/layers.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/ema.h"
#include "optim/sgd.h"
#include "support/check.h"
#include "tensor/rng.h"

using namespace cmha;
using namespace cmha::test;

namespace {

// The error every case below expects from `op`'s backward.
void expect_modified(const std::function<void()>& fn, const std::string& op) {
  expect_error(fn, {op + " backward: a tensor it saved", "was modified in place after the forward"});
}

Tensor leaf(const Shape& shape, uint64_t seed) { return random_tensor(shape, seed, -1.0f, 1.0f, true); }
Tensor constant(const Shape& shape, uint64_t seed) { return random_tensor(shape, seed, 0.5f, 1.5f, false); }

}  // namespace

TEST(AutogradVersion, MessageNamesOpShapeAndVersions) {
  Tensor x = leaf({2, 3}, 1);
  Tensor y = softmax(x, -1);
  y.fill_(0.0);
  try {
    sum(y).backward();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "softmax backward: a tensor it saved (f32[2, 3]) was modified in place after the forward "
                 "(version 0 → 1); write into a clone, or run the backward first");
  }
}

TEST(AutogradVersion, WriteToSavedInputRaisesNamingTheOp) {
  {  // mul saves each side for the other's gradient
    Tensor a = leaf({3, 4}, 2), b = leaf({3, 4}, 3);
    Tensor c = mul(a, b);
    b.detach().fill_(2.0);
    expect_modified([&] { sum(c).backward(); }, "mul");
  }
  {
    Tensor a = leaf({3, 4}, 2), b = constant({3, 4}, 3);
    Tensor c = div(a, b);
    b.copy_(Tensor::ones({3, 4}));
    expect_modified([&] { sum(c).backward(); }, "div");
  }
  {
    Tensor x = leaf({2, 5}, 4), w = leaf({5}, 5), bias = leaf({5}, 6);
    Tensor y = layer_norm(x, w, bias);
    x.detach().zero_();
    expect_modified([&] { sum(y).backward(); }, "layer_norm");
  }
  {  // the weight of layer_norm, written through a view
    Tensor x = leaf({2, 5}, 4), w = leaf({5}, 5), bias = leaf({5}, 6);
    Tensor y = layer_norm(x, w, bias);
    w.detach().slice(0, 0, 2).fill_(3.0);
    expect_modified([&] { sum(y).backward(); }, "layer_norm");
  }
  {
    Tensor a = leaf({2, 3}, 7), b = leaf({3, 4}, 8);
    Tensor c = matmul(a, b);
    a.detach().fill_(1.0);
    expect_modified([&] { sum(c).backward(); }, "matmul");
  }
  {  // linear's weight, by a random fill
    Tensor x = leaf({2, 3}, 9), w = leaf({4, 3}, 10);
    Tensor y = linear(x, w);
    Generator gen(1);
    Tensor wd = w.detach();
    normal_(wd, gen, 0.0f, 1.0f);
    expect_modified([&] { sum(y).backward(); }, "linear");
  }
  {  // linear's input (dW needs it)
    Tensor x = leaf({2, 3}, 9), w = leaf({4, 3}, 10);
    Tensor y = linear(x, w);
    x.detach().fill_(0.5);
    expect_modified([&] { sum(y).backward(); }, "linear");
  }
  {
    Tensor x = leaf({6}, 11);
    Tensor y = gelu(x);
    x.detach().fill_(0.5);
    expect_modified([&] { sum(y).backward(); }, "gelu");
  }
  {
    Tensor x = constant({6}, 12).set_requires_grad(true);
    Tensor y = log(x);
    x.detach().fill_(2.0);
    expect_modified([&] { sum(y).backward(); }, "log");
  }
  {
    Tensor x = leaf({6}, 13);
    Tensor y = pow_scalar(x, 3.0f);
    x.detach().fill_(2.0);
    expect_modified([&] { sum(y).backward(); }, "pow_scalar");
  }
  {  // cross_entropy saves the logits themselves when they are contiguous
    Tensor z = leaf({3, 5}, 14);
    Tensor loss = cross_entropy(z, Tensor::from_vector_i64({0, 2, 4}, {3}));
    z.detach().fill_(0.0);
    expect_modified([&] { loss.backward(); }, "cross_entropy");
  }
  {
    Tensor z = leaf({3, 5}, 15), q = constant({3, 5}, 16);
    Tensor loss = soft_cross_entropy(z, q);
    q.fill_(0.2);
    expect_modified([&] { loss.backward(); }, "soft_cross_entropy");
  }
  {  // masked_fill keeps the caller's mask
    Tensor x = leaf({2, 3}, 17);
    Tensor mask = Tensor::zeros({2, 3}, DType::b8);
    Tensor y = masked_fill(x, mask, -1.0f);
    mask.fill_(1.0);
    expect_modified([&] { sum(y).backward(); }, "masked_fill");
  }
}

TEST(AutogradVersion, WriteToSavedOutputRaisesNamingTheOp) {
  using Op = Tensor (*)(const Tensor&);
  const std::pair<const char*, Op> ops[] = {
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"sqrt", [](const Tensor& x) { return sqrt(add_scalar(mul(x, x), 1.0f)); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"softmax", [](const Tensor& x) { return softmax(x, 0); }},
      {"log_softmax", [](const Tensor& x) { return log_softmax(x, -1); }},
  };
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    Tensor x = leaf({2, 4}, 20);
    Tensor y = op(x);
    y.fill_(0.25);
    expect_modified([&] { sum(y).backward(); }, name);
  }
}

TEST(AutogradVersion, WritesTheBackwardDoesNotReadGoThrough) {
  {  // add saves nothing: its inputs may change freely
    Tensor a = leaf({2, 3}, 30), b = leaf({2, 3}, 31);
    Tensor c = add(a, b);
    a.detach().fill_(5.0);
    b.detach().fill_(-5.0);
    sum(c).backward();
    EXPECT_TRUE(all_close(a.grad(), Tensor::ones({2, 3})));
  }
  {  // exp reads its output, not its input
    Tensor x = leaf({4}, 32);
    Tensor y = exp(x);
    const Tensor expected = y.detach().clone();
    x.detach().fill_(9.0);
    sum(y).backward();
    EXPECT_TRUE(all_close(x.grad(), expected));
  }
  {  // mul by a constant: a's value is not needed for a's gradient
    Tensor a = leaf({3}, 33), b = constant({3}, 34);
    Tensor c = mul(a, b);
    a.detach().fill_(7.0);
    sum(c).backward();
    EXPECT_TRUE(all_close(a.grad(), b));
  }
  {  // matmul with a frozen right side: dA needs B only
    Tensor a = leaf({2, 3}, 35), b = constant({3, 4}, 36);
    Tensor c = matmul(a, b);
    a.detach().fill_(1.0);
    EXPECT_NO_THROW(sum(c).backward());
  }
  {  // a write before the forward, and one after the backward, are nobody's business
    Tensor x = leaf({2, 3}, 37);
    x.detach().fill_(0.5);
    Tensor y = softmax(x, -1);
    sum(mul(y, y)).backward();
    x.detach().fill_(1.5);
    y.fill_(0.0);
  }
  {  // strided input: the op saved its own contiguous copy, so the write cannot reach it
    Tensor x = leaf({3, 2}, 38);
    Tensor y = gelu(x.transpose(0, 1));
    x.detach().fill_(0.5);
    EXPECT_NO_THROW(sum(y).backward());
  }
}

TEST(AutogradVersion, OptimiserStepOrEmaSwapBeforeBackwardRaise) {
  // Two layers: the second's backward reads its weight to reach the first.
  Generator gen(3);
  nn::Linear l1(3, 4, true, gen), l2(4, 2, true, gen);
  std::vector<Tensor> params = l1.parameters();
  for (const Tensor& p : l2.parameters()) params.push_back(p);
  optim::SgdOptions so;
  so.lr = 0.1;
  optim::SGD sgd(params, so);
  const Tensor x = constant({4, 3}, 40);
  auto loss = [&] { return sum(l2.forward(l1.forward(x))); };
  loss().backward();  // gradients for the step below
  Tensor pending = loss();
  sgd.step();
  expect_modified([&] { pending.backward(); }, "linear");

  optim::ExponentialMovingAverage ema(params, 0.9);
  Tensor pending2 = loss();
  ema.swap();
  expect_modified([&] { pending2.backward(); }, "linear");
  ema.swap();
}

// A normal step (accumulated micro-batches, clipping, Adam, EMA update and a
// swap for evaluation, state reload) never trips the check.
TEST(AutogradVersion, NormalTrainingStepsDoNotRaise) {
  Generator gen(5);
  nn::Linear l1(4, 8, true, gen), l2(8, 3, true, gen);
  nn::LayerNorm ln(8);
  std::vector<Tensor> params = l1.parameters();
  for (const Tensor& p : ln.parameters()) params.push_back(p);
  for (const Tensor& p : l2.parameters()) params.push_back(p);
  optim::AdamOptions ao;
  ao.lr = 1e-2;
  optim::Adam adam(params, ao);
  optim::ExponentialMovingAverage ema(params, 0.5);
  const Tensor target = Tensor::from_vector_i64({0, 1, 2, 1, 0, 2}, {6});
  auto loss_of = [&](uint64_t seed) {
    Tensor h = gelu(ln.forward(l1.forward(constant({6, 4}, seed))));
    return cross_entropy(l2.forward(mul(h, softmax(h, -1))), target);
  };
  float first = 0.0f, last = 0.0f;
  for (int step = 0; step < 5; ++step) {
    for (Tensor& p : params) p.zero_grad();
    for (int micro = 0; micro < 2; ++micro) {
      Tensor loss = loss_of(static_cast<uint64_t>(100 + micro));
      if (step == 0 && micro == 0) first = loss.item();
      if (step == 4 && micro == 0) last = loss.item();
      ASSERT_NO_THROW(loss.backward());
    }
    optim::clip_grad_norm(params, 0.1);
    adam.step();
    ema.update();
    ema.swap();
    {
      autograd::NoGradGuard no_grad;
      (void)loss_of(200).item();
    }
    ema.swap();
  }
  ASSERT_NO_THROW(loss_of(100).backward());
  EXPECT_LT(last, first);
}
