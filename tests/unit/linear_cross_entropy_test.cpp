// linear_cross_entropy: the output projection fused with label-smoothed
// cross-entropy in row chunks. PyTorch fixtures, equality with linear then
// cross_entropy over many chunks (loss, predictions, both gradients, any
// thread count), bf16 autocast against f32, a gradient check, no-grad use
// and errors.
#include <gtest/gtest.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "support/check.h"

using namespace cmha;
using namespace cmha::test;

namespace {

// Targets in [0, V) with every seventh row padding (0, the ignore index).
Tensor targets(int64_t N, int64_t V) {
  std::vector<int64_t> t(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) t[i] = i % 7 == 3 ? 0 : 1 + (i * 7919) % (V - 1);
  return Tensor::from_vector_i64(t, {N});
}

struct LossAndGrads {
  Tensor loss, predictions, dx, dw;
};

LossAndGrads fused_loss(Tensor x, Tensor w, const Tensor& t, Reduction red) {
  x.zero_grad();
  w.zero_grad();
  LinearCrossEntropy r = linear_cross_entropy(x, w, t, 0.1f, 0, red);
  r.loss.backward(Tensor::scalar(0.75f));  // an upstream gradient other than 1
  return {r.loss.detach(), r.predictions, x.grad(), w.grad()};
}

LossAndGrads unfused_loss(Tensor x, Tensor w, const Tensor& t, Reduction red) {
  x.zero_grad();
  w.zero_grad();
  Tensor logits = linear(x, w);
  Tensor loss = cross_entropy(logits, t, 0.1f, 0, red);
  loss.backward(Tensor::scalar(0.75f));
  return {loss.detach(), argmax(logits.detach(), 1), x.grad(), w.grad()};
}

}  // namespace

TEST(LinearCrossEntropy, MatchesPyTorch) {
  for (const auto& [name, red] : {std::pair{"linear_cross_entropy_sum", Reduction::sum},
                                  std::pair{"linear_cross_entropy_mean", Reduction::mean}})
    EXPECT_TRUE(matches_fixture(name, [red = red](auto& in) {
      return linear_cross_entropy(in.at("x"), in.at("w"), in.at("t"), 0.1f, 0, red).loss;
    })) << name;
}

TEST(LinearCrossEntropy, EqualsLinearThenCrossEntropyOverManyChunks) {
  // 50 000 classes: 41 rows a chunk, so 100 rows take 3 chunks, the last one short.
  const int64_t N = 100, D = 8, V = 50000;
  Tensor x = random_tensor({N, D}, 91, -2, 2, true), w = random_tensor({V, D}, 92, -1, 1, true);
  const Tensor t = targets(N, V);
  for (Reduction red : {Reduction::sum, Reduction::mean}) {
    const LossAndGrads want = unfused_loss(x, w, t, red);
    omp_set_num_threads(1);
    const LossAndGrads one = fused_loss(x, w, t, red);
    omp_set_num_threads(2);
    const LossAndGrads two = fused_loss(x, w, t, red);
    EXPECT_TRUE(all_close(one.loss, want.loss, 1e-5f, 1e-5f));
    EXPECT_EQ(one.predictions.to_float_vector(), want.predictions.to_float_vector());
    EXPECT_TRUE(all_close(one.dx, want.dx, 1e-6f, 1e-4f));
    EXPECT_TRUE(all_close(one.dw, want.dw, 1e-6f, 1e-4f));
    // oneDNN's AVX-512 GEMMs never split one sum between threads, so there the thread count changes no bit;
    // its AVX2 sgemm splits a long K (V = 50 000 in dx = dlogits W) between them: the last bits may move.
    const bool sums_in_one_thread =
        (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
    for (const auto& [a, b] : {std::pair{one.loss, two.loss}, std::pair{one.dx, two.dx}, std::pair{one.dw, two.dw}}) {
      if (sums_in_one_thread)
        EXPECT_EQ(a.to_float_vector(), b.to_float_vector()) << "thread count changed a result";
      else
        EXPECT_TRUE(all_close(a, b, 1e-7f, 1e-5f)) << "thread count changed a result beyond rounding";
    }
  }
}

TEST(LinearCrossEntropy, Bf16AutocastStaysCloseToF32) {
  const int64_t N = 300, D = 64, V = 9000;  // 2 chunks of 233 rows
  Tensor x = random_tensor({N, D}, 93, -1, 1, true), w = random_tensor({V, D}, 94, -0.3f, 0.3f, true);
  const Tensor t = targets(N, V);
  const LossAndGrads f32 = fused_loss(x, w, t, Reduction::mean);
  LossAndGrads bf16;
  {
    autograd::AutocastGuard autocast(true);
    bf16 = fused_loss(x, w, t, Reduction::mean);
  }
  // bf16 inputs carry 8 bits: the loss to ~1e-3, gradients to a few % of their scale.
  EXPECT_TRUE(all_close(bf16.loss, f32.loss, 0.0f, 2e-3f));
  EXPECT_NE(bf16.loss.item(), f32.loss.item()) << "autocast did not reach the GEMMs";
  EXPECT_TRUE(all_close(bf16.dx, f32.dx, 2e-4f, 3e-2f));
  EXPECT_TRUE(all_close(bf16.dw, f32.dw, 2e-4f, 3e-2f));
}

TEST(LinearCrossEntropy, Gradcheck) {
  Tensor x = random_tensor({5, 3}, 95, -1, 1, true), w = random_tensor({4, 3}, 96, -1, 1, true);
  const Tensor t = Tensor::from_vector_i64({1, 0, 3, 2, 1}, {5});
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return linear_cross_entropy(in[0], in[1], t, 0.2f, 0, Reduction::sum).loss; },
                        {x, w}));
}

TEST(LinearCrossEntropy, WithoutGradientsOnlyTheLossAndPredictions) {
  Tensor x = random_tensor({30, 4}, 97), w = random_tensor({6, 4}, 98);
  const Tensor t = targets(30, 6);
  autograd::NoGradGuard no_grad;
  const LinearCrossEntropy r = linear_cross_entropy(x, w, t, 0.0f, 0, Reduction::sum);
  EXPECT_FALSE(r.loss.requires_grad());
  Tensor logits = linear(x, w);
  EXPECT_TRUE(all_close(r.loss, cross_entropy(logits, t, 0.0f, 0, Reduction::sum), 1e-5f, 1e-5f));
  EXPECT_EQ(r.predictions.to_float_vector(), argmax(logits, 1).to_float_vector());
  // No rows: a zero loss.
  const LinearCrossEntropy empty = linear_cross_entropy(Tensor::zeros({0, 4}), w, Tensor::zeros({0}, DType::i64));
  EXPECT_EQ(empty.loss.item(), 0.0);
}

TEST(LinearCrossEntropy, Errors) {
  const Tensor x = Tensor::zeros({3, 4}), w = Tensor::zeros({5, 4}), t = Tensor::zeros({3}, DType::i64);
  EXPECT_NE(error_of([&] { linear_cross_entropy(x, w, t, 0.0f, -100, Reduction::none); }).find("reduction none"),
            std::string::npos);
  EXPECT_NE(error_of([&] { linear_cross_entropy(x, Tensor::zeros({5, 3}), t); }).find("[V, D]"), std::string::npos);
  EXPECT_NE(error_of([&] { linear_cross_entropy(x, w, Tensor::zeros({4}, DType::i64)); }).find("does not match"),
            std::string::npos);
  EXPECT_NE(error_of([&] { linear_cross_entropy(x, w, Tensor::from_vector_i64({0, 7, 1}, {3})); })
                .find("target 7 in row 1 is out of range for 5 classes"),
            std::string::npos);
  EXPECT_NE(error_of([&] { linear_cross_entropy(x, w, t, 1.5f); }).find("label_smoothing"), std::string::npos);
}
