// soft_cross_entropy: PyTorch comparison (probability targets with label
// smoothing), gradient checks in the logits and the targets, agreement with
// the hard-label cross_entropy on one-hot targets, and the error messages.
#include <gtest/gtest.h>

#include <string>

#include "autograd/ops.h"
#include "support/check.h"

using namespace cmha;
using namespace cmha::test;

namespace {
using In = const std::vector<Tensor>&;

// Rows of mixed one-hot pairs, as mixup makes them: λ·e_a + (1-λ)·e_b.
Tensor mixed_targets(int64_t rows, int64_t classes, uint64_t seed) {
  std::vector<float> q(rows * classes, 0.0f);
  std::vector<float> lam = random_tensor({rows}, seed, 0, 1).to_float_vector();
  for (int64_t i = 0; i < rows; ++i) {
    q[i * classes + (i * 3) % classes] += lam[i];
    q[i * classes + (i * 5 + 1) % classes] += 1.0f - lam[i];
  }
  return Tensor::from_vector(q, {rows, classes});
}
}  // namespace

TEST(SoftCrossEntropyOp, MatchesPyTorch) {
  const std::pair<const char*, Reduction> reductions[] = {
      {"none", Reduction::none}, {"sum", Reduction::sum}, {"mean", Reduction::mean}};
  for (const auto& [name, red] : reductions)
    for (int ls : {0, 1})
      EXPECT_TRUE(matches_fixture(std::string("soft_cross_entropy_") + name + "_ls" + std::to_string(ls),
                                  [red = red, ls](auto& in) {
                                    return soft_cross_entropy(in.at("z"), in.at("q"), 0.1f * ls, red);
                                  }));
  EXPECT_TRUE(matches_fixture("soft_cross_entropy_btc",
                              [](auto& in) { return soft_cross_entropy(in.at("z"), in.at("q"), 0.1f); }));
}

TEST(SoftCrossEntropyOp, Gradcheck) {
  for (float eps : {0.0f, 0.1f})
    for (Reduction red : {Reduction::none, Reduction::sum, Reduction::mean}) {
      Tensor q = mixed_targets(4, 5, 11);
      EXPECT_TRUE(gradcheck([&](In x) { return soft_cross_entropy(x[0], q, eps, red); },
                            {random_tensor({4, 5}, 5, -2, 2, true)}));
    }
  // The targets' gradient too (as for a teacher's soft labels), on [B, T, C].
  EXPECT_TRUE(gradcheck([](In x) { return soft_cross_entropy(x[0], x[1], 0.2f); },
                        {random_tensor({2, 3, 4}, 6, -2, 2, true), random_tensor({2, 3, 4}, 7, 0, 1, true)}));
}

TEST(SoftCrossEntropyOp, OneHotTargetsEqualHardLabels) {
  // A parallel-sized batch (512 × 100) to take the OpenMP path.
  const int64_t N = 512, C = 100;
  std::vector<int64_t> labels(N);
  std::vector<float> onehot(N * C, 0.0f);
  for (int64_t i = 0; i < N; ++i) {
    labels[i] = (i * 37) % C;
    onehot[i * C + labels[i]] = 1.0f;
  }
  Tensor a = random_tensor({N, C}, 20, -3, 3, true), b = random_tensor({N, C}, 20, -3, 3, true);
  Tensor soft = soft_cross_entropy(a, Tensor::from_vector(onehot, {N, C}), 0.1f);
  Tensor hard = cross_entropy(b, Tensor::from_vector_i64(labels, {N}), 0.1f);
  EXPECT_NEAR(soft.item(), hard.item(), 1e-5);
  soft.backward();
  hard.backward();
  EXPECT_TRUE(all_close(a.grad(), b.grad(), 1e-7f, 1e-5f));
}

TEST(SoftCrossEntropyOp, Errors) {
  auto message = [](auto f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  Tensor z = Tensor::zeros({3, 4});
  const std::string shape = message([&] { soft_cross_entropy(z, Tensor::zeros({3, 5})); });
  EXPECT_NE(shape.find("target f32[3, 5]"), std::string::npos) << shape;
  EXPECT_NE(shape.find("does not match logits f32[3, 4]"), std::string::npos) << shape;
  const std::string labels = message([&] { soft_cross_entropy(z, Tensor::from_vector_i64({0, 1, 2}, {3})); });
  EXPECT_NE(labels.find("soft_cross_entropy"), std::string::npos) << labels;
  EXPECT_NE(labels.find("i64"), std::string::npos) << labels;
  const std::string eps = message([&] { soft_cross_entropy(z, Tensor::zeros({3, 4}), 1.5f); });
  EXPECT_NE(eps.find("label_smoothing must be in [0, 1]"), std::string::npos) << eps;
}
