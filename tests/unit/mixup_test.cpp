// Batch mixup / CutMix: boxes, lambda correction, mixed pixels (the step's op) and soft targets by hand.
#include <gtest/gtest.h>

#include "data/image_prepare.h"
#include "data/mixup.h"
#include "support/check.h"

namespace cmha::data {
namespace {

TEST(Mixup, CutmixBoxIsClippedAndLambdaCorrected) {
  // λ = 0.75 on 8×8: side 8·√0.25 = 4, centred at (1, 6): rows [-1, 3) → [0, 3), cols [4, 8).
  const MixDecision m = cutmix_box(0.75f, 8, 8, 1, 6);
  EXPECT_TRUE(m.cutmix);
  EXPECT_EQ(m.y0, 0);
  EXPECT_EQ(m.y1, 3);
  EXPECT_EQ(m.x0, 4);
  EXPECT_EQ(m.x1, 8);
  EXPECT_FLOAT_EQ(m.lambda, 1.0f - 12.0f / 64.0f);
}

TEST(Mixup, MixesEachSampleWithItsMirror) {
  // Mixed by the step's op (data/image_prepare.h) after normalising x / 255: 0.2, 0.4 and 1.0.
  Tensor x = Tensor::from_vector({51, 51, 51, 51, 102, 102, 102, 102, 255, 255, 255, 255}, {3, 1, 2, 2}).to(DType::u8);
  const backend::ImagePrepareParams plain = normalisation_params({0}, {1}, 1);
  auto mixed = [&](const MixDecision& m) {
    backend::ImagePrepareParams p = plain;
    set_mix(p, m);
    return prepare_images(x, Tensor(), p);
  };
  MixDecision m;
  m.lambda = 0.25f;  // sample b ← 0.25·x_b + 0.75·x_{2-b}; the middle one stays
  EXPECT_TRUE(test::all_close(
      mixed(m), Tensor::from_vector({0.8f, 0.8f, 0.8f, 0.8f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f}, {3, 1, 2, 2})));
  const Tensor unmixed = prepare_images(x, Tensor(), plain);
  // side 1 → box rows [1, 1): empty, zero area
  EXPECT_EQ(mixed(cutmix_box(0.75f, 2, 2, 1, 1)).to_float_vector(), unmixed.to_float_vector());
  MixDecision box;
  box.cutmix = true, box.y0 = 0, box.y1 = 1, box.x0 = 1, box.x1 = 2;  // the top-right pixel
  EXPECT_TRUE(test::all_close(mixed(box), Tensor::from_vector({0.2f, 1, 0.2f, 0.2f, 0.4f, 0.4f, 0.4f, 0.4f, 1, 0.2f, 1, 1},
                                                              {3, 1, 2, 2})));
}

TEST(Mixup, SoftTargetsAreSmoothedAndMixed) {
  // 4 classes, smoothing 0.1: off = 0.025, on = 0.925; λ = 0.7; labels {0, 2}.
  const Tensor t = mixed_targets({0, 2}, 4, 0.7f, 0.1f);
  const std::vector<float> expected = {0.7f * 0.925f + 0.3f * 0.025f, 0.025f, 0.7f * 0.025f + 0.3f * 0.925f, 0.025f,
                                       0.7f * 0.025f + 0.3f * 0.925f, 0.025f, 0.7f * 0.925f + 0.3f * 0.025f, 0.025f};
  EXPECT_TRUE(test::all_close(t, Tensor::from_vector(expected, {2, 4}), 1e-6f));
  for (int64_t b = 0; b < 2; ++b) {
    float sum = 0;
    for (int64_t c = 0; c < 4; ++c) sum += t.data<float>()[b * 4 + c];
    EXPECT_NEAR(sum, 1.0f, 1e-6f);
  }
}

TEST(Mixup, DrawsFollowTheSwitchProbabilityAndBetaMean) {
  MixupOptions o;
  o.mixup_alpha = 0.8f, o.cutmix_alpha = 1.0f, o.switch_prob = 0.5f;
  int cutmix = 0;
  double mixup_lambda = 0;
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    SampleRandom rng(1, 0, static_cast<uint64_t>(i));
    const MixDecision m = draw_mix(o, 16, 16, rng);
    ASSERT_GE(m.lambda, 0.0f);
    ASSERT_LE(m.lambda, 1.0f);
    if (m.cutmix)
      ++cutmix;
    else
      mixup_lambda += m.lambda;
  }
  EXPECT_NEAR(cutmix / double(n), 0.5, 0.05);
  EXPECT_NEAR(mixup_lambda / (n - cutmix), 0.5, 0.05);  // Beta(α, α) has mean 1/2
  o.mixup_alpha = o.cutmix_alpha = 0;
  SampleRandom rng(1, 0, 0);
  EXPECT_EQ(draw_mix(o, 16, 16, rng).lambda, 1.0f);
}

}  // namespace
}  // namespace cmha::data
