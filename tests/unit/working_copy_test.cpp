// The bf16 working copy of f32 parameters under bf16 autocast
// (backend/working_copy.h): made once per version of a parameter's values,
// rewritten by Adam in its update pass, and the training it serves the same
// bit for bit as converting every weight in every forward.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/working_copy.h"
#include "optim/adam.h"
#include "support/check.h"

using namespace cmha;
using namespace cmha::test;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.shape() == cb.shape() && ca.dtype() == cb.dtype() &&
         std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

// A two-layer model under bf16 autocast: linear, GELU-free tanh, then a
// vocabulary projection through linear_cross_entropy; `fresh` converts every
// weight anew in each forward (what cmha did before the kept copy), by
// handing the layers a new handle of each weight.
struct MlpWeights {
  Tensor w1, b1, w2;
  std::vector<Tensor> params() const { return {w1, b1, w2}; }
};

MlpWeights make_model() {
  return {random_tensor({24, 16}, 11, -0.5f, 0.5f, true), random_tensor({24}, 12, -0.1f, 0.1f, true),
          random_tensor({40, 24}, 13, -0.5f, 0.5f, true)};
}

Tensor loss_of(const MlpWeights& m, const Tensor& x, const Tensor& target, bool fresh) {
  autograd::AutocastGuard autocast(true);
  // A new leaf handle over the same storage has no kept copy: converted every call.
  const auto handle = [&](const Tensor& w) {
    if (!fresh) return w;
    Tensor h = w.detach();
    h.set_requires_grad(true);
    return h;
  };
  const Tensor w1 = handle(m.w1), w2 = handle(m.w2);
  Tensor h = tanh(linear(x, w1, m.b1));
  Tensor loss = linear_cross_entropy(h, w2, target, 0.1f).loss;
  loss.backward();
  if (fresh) {  // the gradients of the handles belong to the parameters
    Tensor(m.w1).set_grad(w1.grad());
    Tensor(m.w2).set_grad(w2.grad());
  }
  return loss;
}

}  // namespace

TEST(Bf16WorkingCopy, TrainingIsBitIdenticalToConvertingEveryForward) {
  const MlpWeights kept = make_model(), fresh = make_model();
  optim::AdamOptions o;
  o.lr = 1e-2;
  optim::Adam adam_kept(kept.params(), o), adam_fresh(fresh.params(), o);
  for (int step = 0; step < 5; ++step) {
    const Tensor x = random_tensor({8, 16}, 100 + step);
    Tensor target = Tensor::from_vector_i64({1, 5, 39, 0, 7, 7, 22, 3}, {8});
    for (const Tensor& p : kept.params()) Tensor(p).zero_grad();
    for (const Tensor& p : fresh.params()) Tensor(p).zero_grad();
    const Tensor lk = loss_of(kept, x, target, false), lf = loss_of(fresh, x, target, true);
    EXPECT_TRUE(same_bits(lk, lf)) << "step " << step << ": " << lk.item() << " vs " << lf.item();
    adam_kept.step();
    adam_fresh.step();
    for (size_t i = 0; i < kept.params().size(); ++i)
      EXPECT_TRUE(same_bits(kept.params()[i], fresh.params()[i])) << "step " << step << ", parameter " << i;
  }
}

TEST(Bf16WorkingCopy, AdamRewritesTheKeptCopyInPlace) {
  Tensor w = random_tensor({33, 7}, 21, -1.0f, 1.0f, true);
  const Tensor first = backend::bf16_working_copy(w);
  EXPECT_TRUE(same_bits(first, w.detach().to(DType::bf16)));
  EXPECT_TRUE(backend::bf16_working_copy(w).same(first)) << "not kept: converted again";
  w.set_grad(random_tensor({33, 7}, 22));
  optim::Adam adam({w});
  adam.step();
  const Tensor after = backend::bf16_working_copy(w);
  EXPECT_EQ(after.raw_data(), first.raw_data()) << "Adam did not rewrite the kept copy";
  EXPECT_TRUE(same_bits(after, w.detach().to(DType::bf16))) << "the copy is not the conversion of the new values";
  // Adam of a parameter with no copy leaves it so.
  Tensor u = random_tensor({5}, 23, -1.0f, 1.0f, true);
  u.set_grad(random_tensor({5}, 24));
  optim::Adam adam_u({u});
  adam_u.step();
  EXPECT_FALSE(backend::bf16_copy_to_rewrite(u).defined());
}

TEST(Bf16WorkingCopy, AnyWriteToTheParameterMakesTheCopyStale) {
  Tensor w = random_tensor({6, 5}, 31, -1.0f, 1.0f, true);
  const Tensor before = backend::bf16_working_copy(w).clone();
  w.detach().copy_(random_tensor({6, 5}, 32));  // a checkpoint's values, say
  EXPECT_TRUE(same_bits(backend::bf16_working_copy(w), w.detach().to(DType::bf16)));
  EXPECT_FALSE(same_bits(backend::bf16_working_copy(w), before));
  w.detach().fill_(0.25);
  EXPECT_TRUE(same_bits(backend::bf16_working_copy(w), Tensor::full({6, 5}, 0.25, DType::bf16)));
}

TEST(Bf16WorkingCopy, AGraphThatSavedAStaleCopyRefusesItsBackward) {
  Tensor w = random_tensor({4, 3}, 41, -1.0f, 1.0f, true);
  const Tensor x = random_tensor({2, 3}, 42, -1.0f, 1.0f, true);
  autograd::AutocastGuard autocast(true);
  Tensor y = sum(linear(x, w));
  w.detach().copy_(random_tensor({4, 3}, 43));
  (void)sum(linear(x, w));  // refreshes the kept copy in place
  EXPECT_THROW(y.backward(), Error);
}

TEST(Bf16WorkingCopy, OnlyContiguousF32LeavesKeepACopy) {
  const Tensor w = random_tensor({4, 6}, 51, -1.0f, 1.0f, true);
  const Tensor t = w.transpose(0, 1);
  EXPECT_TRUE(same_bits(backend::bf16_working_copy(t), t.detach().to(DType::bf16)));
  EXPECT_FALSE(backend::bf16_copy_to_rewrite(t).defined());
  const Tensor b = Tensor::ones({3}, DType::bf16);
  EXPECT_TRUE(same_bits(backend::bf16_working_copy(b), b));
}
