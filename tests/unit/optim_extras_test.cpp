// Learning-rate schedules, gradient-norm clipping, the weight EMA and SGD:
// hand-computed values, and PyTorch fixtures (tests/reference/fixtures_optim_extras.py).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numbers>

#include "optim/clip.h"
#include "optim/ema.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
#include "support/check.h"

using namespace cmha;
using namespace cmha::test;
using cmha::optim::EmaOptions;
using cmha::optim::ExponentialMovingAverage;
using cmha::optim::LrSchedule;
using cmha::optim::ScheduleKind;
using cmha::optim::ScheduleOptions;
using cmha::optim::SGD;
using cmha::optim::SgdOptions;
using cmha::optim::SgdParam;

namespace {

// Relative closeness for doubles.
::testing::AssertionResult near_rel(double actual, double expected, double rtol) {
  if (std::fabs(actual - expected) <= rtol * std::fabs(expected)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << actual << " vs expected " << expected << " (rtol " << rtol << ")";
}

}  // namespace

// ---------------------------------------------------------------- schedules

TEST(LrSchedule, InverseSqrtIsFairseqsWarmupThenDecay) {
  // fairseq's transformer_wmt_en_de: lr 5e-4, 4000 warmup updates from 1e-7.
  LrSchedule s = LrSchedule::inverse_sqrt(5e-4, 4000, 1e-7);
  const double step = (5e-4 - 1e-7) / 4000;
  EXPECT_DOUBLE_EQ(s.lr_at(0), 1e-7);  // the first update runs at warmup_init_lr
  EXPECT_DOUBLE_EQ(s.lr_at(1), 1e-7 + step);
  EXPECT_DOUBLE_EQ(s.lr_at(2000), 1e-7 + 2000 * step);
  EXPECT_DOUBLE_EQ(s.lr_at(3999), 1e-7 + 3999 * step);  // last warmup update
  EXPECT_DOUBLE_EQ(s.lr_at(4000), 5e-4);                 // the peak, at update == warmup
  EXPECT_DOUBLE_EQ(s.lr_at(4001), 5e-4 * std::sqrt(4000.0 / 4001.0));
  EXPECT_DOUBLE_EQ(s.lr_at(16000), 2.5e-4);              // ×√(1/4)
  EXPECT_DOUBLE_EQ(s.lr_at(400000), 5e-5);               // ×√(1/100)
  EXPECT_DOUBLE_EQ(s.lr_at(16000, 3.7), s.lr_at(16000)); // the epoch is not read

  LrSchedule from_zero = LrSchedule::inverse_sqrt(1e-3, 10);
  EXPECT_EQ(from_zero.lr_at(0), 0.0);
  EXPECT_DOUBLE_EQ(from_zero.lr_at(5), 5e-4);
  EXPECT_DOUBLE_EQ(from_zero.lr_at(10), 1e-3);
  EXPECT_DOUBLE_EQ(from_zero.lr_at(40), 5e-4);
}

TEST(LrSchedule, NoamIsVaswaniWithOneBasedStepNum) {
  LrSchedule s = LrSchedule::noam(2.0, 512, 4000);
  const double scale = 2.0 / std::sqrt(512.0);
  EXPECT_DOUBLE_EQ(s.lr_at(0), scale * 1.0 * std::pow(4000.0, -1.5));  // step_num 1
  EXPECT_DOUBLE_EQ(s.lr_at(1), scale * 2.0 * std::pow(4000.0, -1.5));
  EXPECT_DOUBLE_EQ(s.lr_at(3999), scale / std::sqrt(4000.0));         // the peak: step_num = warmup
  EXPECT_LT(s.lr_at(3998), s.lr_at(3999));
  EXPECT_LT(s.lr_at(4000), s.lr_at(3999));
  EXPECT_DOUBLE_EQ(s.lr_at(15999), scale / std::sqrt(16000.0));
  // The same curve as inverse_sqrt from 0, one update later.
  LrSchedule inv = LrSchedule::inverse_sqrt(2.0 / std::sqrt(512.0 * 4000.0), 4000);
  for (int64_t u : {0, 1, 7, 1000, 3998, 3999, 4000, 12345, 100000})
    EXPECT_TRUE(near_rel(s.lr_at(u), inv.lr_at(u + 1), 1e-12)) << "update " << u;
}

TEST(LrSchedule, CosinePerEpochLikeDeiT) {
  // DeiT-S: lr 5e-4, 300 epochs, 5 warmup epochs from 1e-6, lr_min 1e-5 (timm, t_in_epochs).
  LrSchedule s = LrSchedule::cosine(5e-4, 300, 5, 1e-5, 1e-6, /*per_epoch=*/true);
  const double wstep = (5e-4 - 1e-6) / 5;
  EXPECT_DOUBLE_EQ(s.lr_at(0, 0.0), 1e-6);
  EXPECT_DOUBLE_EQ(s.lr_at(99, 0.99), 1e-6);  // whole epochs: the rate changes at boundaries
  EXPECT_DOUBLE_EQ(s.lr_at(100, 1.0), 1e-6 + wstep);
  EXPECT_DOUBLE_EQ(s.lr_at(450, 4.5), 1e-6 + 4 * wstep);  // the last warmup epoch, 4.002e-4
  // Epoch 5: the cosine, already at t = 5 of 300 (the warmup is part of the 300 epochs).
  const double at5 = 1e-5 + 0.5 * (5e-4 - 1e-5) * (1 + std::cos(std::numbers::pi * 5 / 300));
  EXPECT_DOUBLE_EQ(s.lr_at(500, 5.0), at5);
  EXPECT_DOUBLE_EQ(s.lr_at(0, 5.0), at5);  // the update count is not read
  EXPECT_DOUBLE_EQ(s.lr_at(15000, 150.0), 1e-5 + 0.5 * (5e-4 - 1e-5));  // half-way: the mean
  EXPECT_GT(s.lr_at(29999, 299.9), 1e-5);
  EXPECT_DOUBLE_EQ(s.lr_at(30000, 300.0), 1e-5);  // end, and cool-down epochs after it
  EXPECT_DOUBLE_EQ(s.lr_at(30900, 309.0), 1e-5);
}

TEST(LrSchedule, CosinePerUpdateWithAndWithoutWarmupPrefix) {
  LrSchedule prefix = LrSchedule::cosine(1e-3, 1000, 100, 1e-5, 0.0, false, /*warmup_prefix=*/true);
  EXPECT_EQ(prefix.lr_at(0), 0.0);
  EXPECT_DOUBLE_EQ(prefix.lr_at(50), 5e-4);
  EXPECT_DOUBLE_EQ(prefix.lr_at(99), 9.9e-4);
  EXPECT_DOUBLE_EQ(prefix.lr_at(100), 1e-3);                       // the cosine starts at its top
  EXPECT_DOUBLE_EQ(prefix.lr_at(600), 1e-5 + 0.5 * (1e-3 - 1e-5));  // 500 of 1000
  EXPECT_GT(prefix.lr_at(1099), 1e-5);
  EXPECT_DOUBLE_EQ(prefix.lr_at(1100), 1e-5);
  EXPECT_DOUBLE_EQ(prefix.lr_at(5000, 42.0), 1e-5);

  LrSchedule plain = LrSchedule::cosine(0.1, 16, 0, 0.001);
  EXPECT_DOUBLE_EQ(plain.lr_at(0), 0.1);  // no warmup: the first update at lr
  EXPECT_DOUBLE_EQ(plain.lr_at(8), 0.001 + 0.5 * (0.1 - 0.001));
  EXPECT_DOUBLE_EQ(plain.lr_at(16), 0.001);
  // warmup == total is allowed: the warmup ends where the cosine does.
  EXPECT_DOUBLE_EQ(LrSchedule::cosine(1.0, 10, 10, 0.1).lr_at(10), 0.1);
}

TEST(LrSchedule, ConstantWithOptionalWarmup) {
  LrSchedule flat = LrSchedule::constant(3e-4);
  EXPECT_EQ(flat.lr_at(0), 3e-4);
  EXPECT_EQ(flat.lr_at(1000000, 12.5), 3e-4);

  LrSchedule warm = LrSchedule::constant(1e-3, 10, 1e-4);
  EXPECT_DOUBLE_EQ(warm.lr_at(0), 1e-4);
  EXPECT_DOUBLE_EQ(warm.lr_at(5), 1e-4 + 5 * (9e-4 / 10));
  EXPECT_DOUBLE_EQ(warm.lr_at(9), 1e-4 + 9 * (9e-4 / 10));
  EXPECT_EQ(warm.lr_at(10), 1e-3);
  EXPECT_EQ(warm.lr_at(11), 1e-3);

  ScheduleOptions o;
  o.kind = ScheduleKind::constant;
  o.lr = 1.0;
  o.warmup = 4;
  o.per_epoch = true;
  LrSchedule per_epoch(o);
  EXPECT_EQ(per_epoch.lr_at(999, 0.9), 0.0);
  EXPECT_EQ(per_epoch.lr_at(0, 2.0), 0.5);
  EXPECT_EQ(per_epoch.lr_at(0, 4.0), 1.0);
}

TEST(LrSchedule, MatchesUpstreamFormulasAndTorchCosineAnnealing) {
  SafetensorsFile f = load_fixture("optim_schedules");
  const std::map<std::string, LrSchedule> cases = {
      {"inverse_sqrt", LrSchedule::inverse_sqrt(5e-4, 4000, 1e-7)},
      {"noam", LrSchedule::noam(2.0, 512, 4000)},
      {"cosine_deit", LrSchedule::cosine(5e-4, 300, 5, 1e-5, 1e-6, true)},
      {"cosine_prefix", LrSchedule::cosine(1e-3, 1000, 100, 1e-5, 0.0, false, true)},
      {"cosine_torch", LrSchedule::cosine(0.1, 16, 0, 0.001)},
  };
  for (const auto& [name, s] : cases) {
    const std::vector<int64_t> t = fixture_tensor(f, name + ".update").to_i64_vector();
    const std::vector<float> lr = fixture_tensor(f, name + ".lr").to_float_vector();
    ASSERT_EQ(t.size(), lr.size()) << name;
    ASSERT_FALSE(t.empty()) << name;
    const bool per_epoch = s.options().per_epoch;
    for (size_t i = 0; i < t.size(); ++i) {
      const double got = per_epoch ? s.lr_at(0, static_cast<double>(t[i])) : s.lr_at(t[i]);
      // The fixture stores f32: compare after the same rounding (a little slack for cos).
      EXPECT_NEAR(static_cast<float>(got), lr[i], 2e-7 * std::fabs(lr[i]) + 1e-12) << name << " at " << t[i];
    }
  }
}

TEST(LrSchedule, BadSettingsAreErrorsNamingThem) {
  EXPECT_EQ(optim::parse_schedule_kind("inverse_sqrt"), ScheduleKind::inverse_sqrt);
  EXPECT_EQ(optim::parse_schedule_kind("cosine"), ScheduleKind::cosine);
  EXPECT_STREQ(optim::schedule_kind_name(ScheduleKind::noam), "noam");
  expect_error([] { optim::parse_schedule_kind("linear"); }, {"unknown learning-rate schedule 'linear'"});

  expect_error([] { LrSchedule::constant(-1e-3); }, {"lr -0.001"});
  expect_error([] { LrSchedule::constant(std::nan("")); }, {"lr nan"});
  expect_error([] { LrSchedule::constant(1e-3, -5); }, {"warmup -5 is negative"});
  expect_error([] { LrSchedule::constant(1e-3, 5, -1e-7); }, {"warmup_init_lr -1e-07"});
  expect_error([] { LrSchedule::inverse_sqrt(5e-4, 0); }, {"warmup must be at least 1"});
  expect_error([] { LrSchedule::inverse_sqrt(-5e-4, 4000); }, {"'inverse_sqrt': lr -0.0005"});
  expect_error([] { LrSchedule::noam(0.0, 512, 4000); }, {"factor 0"});
  expect_error([] { LrSchedule::noam(1.0, 0, 4000); }, {"d_model 0"});
  expect_error([] { LrSchedule::noam(1.0, 512, 0); }, {"'noam': warmup must be at least 1"});
  expect_error([] { LrSchedule::cosine(1e-3, 0); }, {"total 0 must be at least 1 update"});
  expect_error([] { LrSchedule::cosine(1e-3, 0, 0, 0.0, 0.0, true); }, {"total 0 must be at least 1 epoch"});
  expect_error([] { LrSchedule::cosine(1e-3, 100, 101); }, {"warmup 101 exceeds the schedule's total length 100"});
  EXPECT_NO_THROW(LrSchedule::cosine(1e-3, 100, 101, 0.0, 0.0, false, /*warmup_prefix=*/true));
  expect_error([] { LrSchedule::cosine(1e-3, 100, 5, 2e-3); }, {"lr_min 0.002 must lie between 0 and lr 0.001"});
  expect_error([] { LrSchedule::cosine(1e-3, 100, 5, -1e-5); }, {"lr_min -1e-05"});
  ScheduleOptions o;
  o.kind = ScheduleKind::inverse_sqrt;
  o.warmup = 10;
  o.per_epoch = true;
  expect_error([&] { LrSchedule s(o); }, {"per-epoch stepping is only for the constant and cosine schedules"});

  LrSchedule s = LrSchedule::constant(1e-3);
  expect_error([&] { s.lr_at(-1); }, {"update -1 is negative"});
  expect_error([&] { s.lr_at(0, -0.5); }, {"epoch -0.5"});
  expect_error([&] { s.lr_at(0, std::numeric_limits<double>::infinity()); }, {"epoch inf"});
}

// ---------------------------------------------------------------- clipping

TEST(ClipGradNorm, MatchesTorchClipGradNorm) {
  SafetensorsFile f = load_fixture("optim_clip_grad_norm");
  std::vector<Tensor> params;
  for (const char* k : {"w", "b", "c"}) {
    Tensor g = fixture_tensor(f, std::string("grad.") + k);
    Tensor p = Tensor::zeros(g.shape()).set_requires_grad(true).set_name(k);
    p.set_grad(g);
    params.push_back(p);
  }
  params.push_back(Tensor::zeros({2}).set_requires_grad(true).set_name("d"));  // no gradient: skipped
  const double expected = fixture_tensor(f, "norm").to_float_vector()[0];
  ASSERT_GT(expected, 1.0);  // so max_norm 1 clips
  EXPECT_TRUE(near_rel(optim::grad_norm(params), expected, 1e-6));
  const double norm = optim::clip_grad_norm(params, 1.0);
  EXPECT_TRUE(near_rel(norm, expected, 1e-6));
  const char* names[] = {"w", "b", "c"};
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(all_close(params[i].grad(), fixture_tensor(f, std::string("clipped.") + names[i]), 1e-7f, 1e-6f))
        << names[i];
  EXPECT_FALSE(params[3].grad().defined());
  EXPECT_TRUE(near_rel(optim::grad_norm(params), 1.0, 1e-5));  // the clipped norm is max_norm (less 1e-6)
}

TEST(ClipGradNorm, HandComputedAndUnclippedBelowMaxNorm) {
  Tensor a = Tensor::zeros({2}).set_requires_grad(true);
  Tensor b = Tensor::zeros({1}).set_requires_grad(true);
  a.set_grad(Tensor::from_vector({3.0f, 0.0f}, {2}));
  b.set_grad(Tensor::from_vector({-4.0f}, {1}));
  EXPECT_EQ(optim::clip_grad_norm({a, b}, 5.5), 5.0);  // below max_norm: untouched
  EXPECT_EQ(a.grad().to_float_vector(), (std::vector<float>{3.0f, 0.0f}));
  EXPECT_EQ(b.grad().to_float_vector(), (std::vector<float>{-4.0f}));

  EXPECT_EQ(optim::clip_grad_norm({a, b}, 1.0), 5.0);
  const float c = static_cast<float>(1.0 / (5.0 + 1e-6));
  EXPECT_EQ(a.grad().to_float_vector(), (std::vector<float>{3.0f * c, 0.0f}));
  EXPECT_EQ(b.grad().to_float_vector(), (std::vector<float>{-4.0f * c}));

  EXPECT_EQ(optim::grad_norm({Tensor::zeros({3})}), 0.0);  // no gradients at all
  EXPECT_EQ(optim::clip_grad_norm({}, 1.0), 0.0);
}

TEST(ClipGradNorm, NonContiguousGradientIsScaledThroughTheParameter) {
  Tensor p = Tensor::zeros({3, 2}).set_requires_grad(true);
  Tensor g = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);  // [3, 2], strided
  ASSERT_FALSE(g.is_contiguous());
  p.set_grad(g);
  const double norm = optim::clip_grad_norm({p}, 1.0);
  EXPECT_DOUBLE_EQ(norm, std::sqrt(91.0));
  const float c = static_cast<float>(1.0 / (std::sqrt(91.0) + 1e-6));
  Tensor expected = Tensor::from_vector({1 * c, 4 * c, 2 * c, 5 * c, 3 * c, 6 * c}, {3, 2});
  EXPECT_TRUE(all_close(p.grad(), expected, 0.0f, 0.0f));
}

TEST(ClipGradNorm, NonFiniteNormIsReturnedWithoutScaling) {
  Tensor a = Tensor::zeros({3}).set_requires_grad(true);
  Tensor b = Tensor::zeros({2}).set_requires_grad(true);
  a.set_grad(Tensor::from_vector({1.0f, 2.0f, 3.0f}, {3}));
  b.set_grad(Tensor::from_vector({10.0f, 20.0f}, {2}));
  EXPECT_TRUE(optim::all_finite({a, b}));

  b.grad().data<float>()[1] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(optim::all_finite({a, b}));
  EXPECT_TRUE(optim::all_finite({a}));
  EXPECT_TRUE(std::isinf(optim::clip_grad_norm({a, b}, 1.0)));
  EXPECT_EQ(a.grad().to_float_vector(), (std::vector<float>{1.0f, 2.0f, 3.0f}));  // untouched

  b.grad().data<float>()[1] = std::nanf("");
  EXPECT_FALSE(optim::all_finite({a, b}));
  EXPECT_TRUE(std::isnan(optim::clip_grad_norm({a, b}, 1.0)));
  EXPECT_EQ(a.grad().to_float_vector(), (std::vector<float>{1.0f, 2.0f, 3.0f}));
  EXPECT_TRUE(optim::all_finite({Tensor::zeros({2})}));  // no gradient: nothing to check

  // The largest f32 values square to a finite double: only inf/NaN are non-finite.
  b.grad().data<float>()[1] = std::numeric_limits<float>::max();
  EXPECT_TRUE(optim::all_finite({a, b}));
  EXPECT_TRUE(std::isfinite(optim::grad_norm({a, b})));
}

TEST(ClipGradNorm, SameBitsForAnyThreadCountOnLargeGradients) {
  // Blocks of 65536 elements: these span several, with ragged ends, and a
  // non-finite value lands in a late block.
  std::vector<Tensor> params;
  for (int64_t n : {300001, 7, 131072, 70000}) {
    Tensor p = Tensor::zeros({n}).set_requires_grad(true);
    p.set_grad(random_tensor({n}, 10 + n));
    params.push_back(p);
  }
  long double ref = 0;
  for (const Tensor& p : params)
    for (float v : p.grad().to_float_vector()) ref += static_cast<long double>(v) * v;
  const double expected = std::sqrt(static_cast<double>(ref));

  const int saved = omp_get_max_threads();
  std::vector<double> norms;
  for (int threads : {1, 2, 3, 8}) {
    omp_set_num_threads(threads);
    norms.push_back(optim::grad_norm(params));
    EXPECT_TRUE(optim::all_finite(params));
  }
  omp_set_num_threads(saved);
  for (double n : norms) EXPECT_EQ(n, norms[0]);  // bit for bit
  EXPECT_TRUE(near_rel(norms[0], expected, 1e-12));

  std::vector<Tensor> before;
  for (const Tensor& p : params) before.push_back(p.grad().clone());
  const double norm = optim::clip_grad_norm(params, 10.0);
  EXPECT_EQ(norm, norms[0]);
  const float c = static_cast<float>(10.0 / (norm + 1e-6));
  for (size_t i = 0; i < params.size(); ++i) {
    const std::vector<float> g = params[i].grad().to_float_vector(), b = before[i].to_float_vector();
    for (size_t k = 0; k < g.size(); k += 997) ASSERT_EQ(g[k], b[k] * c) << "parameter " << i << " element " << k;
  }

  params[2].grad().data<float>()[131071] = -std::numeric_limits<float>::infinity();
  EXPECT_FALSE(optim::all_finite(params));
}

TEST(ClipGradNorm, BadSettingsAndGradientsAreErrors) {
  Tensor p = Tensor::zeros({2}).set_requires_grad(true).set_name("w");
  p.set_grad(Tensor::ones({2}));
  expect_error([&] { optim::clip_grad_norm({p}, 0.0); }, {"max_norm 0 must be a positive finite number"});
  expect_error([&] { optim::clip_grad_norm({p}, -1.0); }, {"max_norm -1"});
  expect_error([&] { optim::clip_grad_norm({p}, std::nan("")); }, {"max_norm nan"});
  p.set_grad(Tensor::ones({3}));
  expect_error([&] { optim::clip_grad_norm({p}, 1.0); }, {"the gradient of parameter 'w' is f32[3]"});
  expect_error([&] { optim::all_finite({p}); }, {"all_finite: the gradient of parameter 'w'"});
  p.set_grad(Tensor::zeros({2}, DType::i64));
  expect_error([&] { optim::grad_norm({p}); }, {"grad_norm: the gradient of parameter 'w'"});
  expect_error([&] { optim::grad_norm({Tensor()}); }, {"parameter 0 is an undefined tensor"});
}

// ---------------------------------------------------------------- EMA

TEST(WeightEma, UpdateIsDecayTimesShadowPlusRestTimesWeights) {
  Tensor p = Tensor::from_vector({1.0f, 2.0f}, {2}).set_requires_grad(true);  // no gradient needed
  ExponentialMovingAverage ema({p}, 0.5);
  EXPECT_EQ(ema.shadow()[0].to_float_vector(), (std::vector<float>{1.0f, 2.0f}));  // starts as the weights
  EXPECT_FALSE(ema.shadow()[0].same(p));
  p.copy_(Tensor::from_vector({3.0f, 6.0f}, {2}));
  ema.update();
  EXPECT_EQ(ema.shadow()[0].to_float_vector(), (std::vector<float>{2.0f, 4.0f}));
  p.zero_();
  ema.update();
  EXPECT_EQ(ema.shadow()[0].to_float_vector(), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(ema.updates(), 2);
  EXPECT_EQ(p.to_float_vector(), (std::vector<float>{0.0f, 0.0f}));  // the weights are never touched

  // Against constant weights the shadow closes the gap by decay^n.
  Tensor q = Tensor::from_vector({0.0f, 10.0f, -4.0f}, {3});
  ExponentialMovingAverage slow({q}, 0.9);
  q.copy_(Tensor::from_vector({1.0f, 0.0f, 4.0f}, {3}));
  for (int i = 0; i < 20; ++i) slow.update();
  const float r = static_cast<float>(std::pow(0.9, 20));
  Tensor expected = Tensor::from_vector({1.0f - r, 10.0f * r, 4.0f - 8.0f * r}, {3});
  EXPECT_TRUE(all_close(slow.shadow()[0], expected, 1e-5f, 1e-5f));

  ExponentialMovingAverage frozen({q}, 1.0), copying({q}, 0.0);
  q.fill_(7.0);
  frozen.update();
  copying.update();
  EXPECT_EQ(frozen.shadow()[0].to_float_vector(), (std::vector<float>{1.0f, 0.0f, 4.0f}));
  EXPECT_EQ(copying.shadow()[0].to_float_vector(), (std::vector<float>{7.0f, 7.0f, 7.0f}));
}

TEST(WeightEma, OptionalTensorFlowStyleDecayWarmup) {
  Tensor p = Tensor::zeros({1});
  EXPECT_EQ(ExponentialMovingAverage({p}, 0.999).current_decay(), 0.999);  // timm ModelEmaV2: no warmup
  ExponentialMovingAverage ema({p}, EmaOptions{0.999, true});
  EXPECT_DOUBLE_EQ(ema.current_decay(), 0.1);  // (1 + 0)/(10 + 0)
  p.fill_(1.0);
  ema.update();  // 0.1·0 + 0.9·1
  EXPECT_FLOAT_EQ(ema.shadow()[0].item(), 0.9f);
  EXPECT_DOUBLE_EQ(ema.current_decay(), 2.0 / 11.0);
  ema.set_updates(8990);  // (1 + n)/(10 + n) = 0.999 exactly here, then caps
  EXPECT_DOUBLE_EQ(ema.current_decay(), 0.999);
  ema.set_updates(100000);
  EXPECT_EQ(ema.current_decay(), 0.999);
  expect_error([&] { ema.set_updates(-1); }, {"EMA: update count -1 is negative"});
}

TEST(WeightEma, SwapAndCopyToForEvaluation) {
  Tensor w = Tensor::from_vector({1.0f, 1.0f}, {2}).set_name("w");
  Tensor b = Tensor::from_vector({5.0f}, {1}).set_name("b");
  ExponentialMovingAverage ema({w, b}, 0.75);
  w.fill_(5.0);
  b.fill_(1.0);
  ema.update();  // w: 0.75 + 1.25 = 2, b: 3.75 + 0.25 = 4
  EXPECT_EQ(ema.shadow()[0].to_float_vector(), (std::vector<float>{2.0f, 2.0f}));
  EXPECT_EQ(ema.shadow()[1].to_float_vector(), (std::vector<float>{4.0f}));

  Tensor w_eval = Tensor::zeros({2}), b_eval = Tensor::zeros({1});
  ema.copy_to({w_eval, b_eval});
  EXPECT_EQ(w_eval.to_float_vector(), (std::vector<float>{2.0f, 2.0f}));
  EXPECT_EQ(b_eval.to_float_vector(), (std::vector<float>{4.0f}));

  ema.swap();
  EXPECT_TRUE(ema.swapped());
  EXPECT_EQ(w.to_float_vector(), (std::vector<float>{2.0f, 2.0f}));  // averaged weights in the model
  EXPECT_EQ(ema.shadow()[0].to_float_vector(), (std::vector<float>{5.0f, 5.0f}));
  expect_error([&] { ema.update(); }, {"EMA: update() while the averaged weights are swapped in"});
  w_eval.zero_();
  ema.copy_to({w_eval, b_eval});  // still the averages while swapped
  EXPECT_EQ(w_eval.to_float_vector(), (std::vector<float>{2.0f, 2.0f}));
  ema.swap();
  EXPECT_FALSE(ema.swapped());
  EXPECT_EQ(w.to_float_vector(), (std::vector<float>{5.0f, 5.0f}));
  EXPECT_EQ(b.to_float_vector(), (std::vector<float>{1.0f}));

  // A checkpoint restores the shadow by copying into it.
  ema.shadow()[1].copy_(Tensor::from_vector({-3.0f}, {1}));
  ema.copy_to({w_eval, b_eval});
  EXPECT_EQ(b_eval.to_float_vector(), (std::vector<float>{-3.0f}));

  expect_error([&] { ema.copy_to({w_eval}); }, {"EMA: copy_to got 1 tensors but the average tracks 2"});
  expect_error([&] { ema.copy_to({w_eval, Tensor::zeros({2}).set_name("bb")}); },
               {"EMA: copy_to destination parameter 'bb' is f32[2]"});
}

TEST(WeightEma, LargeParameterUpdatesInParallelLikeASmallOne) {
  // Above the OpenMP threshold: the same per-element result as a serial run.
  const int64_t n = 100000;
  Tensor big = random_tensor({n}, 21);
  Tensor small = big.slice(0, 0, 10).clone();
  const std::vector<float> start = small.to_float_vector();
  ExponentialMovingAverage a({big}, 0.99996), b({small}, 0.99996);
  big.copy_(random_tensor({n}, 22));
  small.copy_(big.slice(0, 0, 10));
  a.update();
  b.update();
  EXPECT_TRUE(all_close(a.shadow()[0].slice(0, 0, 10), b.shadow()[0], 0.0f, 0.0f));
  const std::vector<float> w = small.to_float_vector(), s = b.shadow()[0].to_float_vector();
  for (size_t k = 0; k < s.size(); ++k)
    EXPECT_NEAR(s[k], 0.99996 * start[k] + 0.00004 * w[k], 1e-6) << k;
}

TEST(WeightEma, BadSettingsAreErrors) {
  Tensor p = Tensor::zeros({2});
  expect_error([&] { ExponentialMovingAverage({p}, -0.1); }, {"EMA: decay -0.1 must lie in [0, 1]"});
  expect_error([&] { ExponentialMovingAverage({p}, 1.5); }, {"EMA: decay 1.5 must lie in [0, 1]"});
  expect_error([&] { ExponentialMovingAverage({p}, std::nan("")); }, {"EMA: decay nan"});
  expect_error([&] { ExponentialMovingAverage({Tensor::zeros({2}, DType::i64)}, 0.9); },
               {"EMA: parameter 0 is i64[2]"});
  expect_error([&] { ExponentialMovingAverage({Tensor::zeros({2, 3}).transpose(0, 1)}, 0.9); },
               {"only contiguous f32 parameters"});
}

// ---------------------------------------------------------------- SGD

namespace {

const char* kSgdNames[] = {"w", "c", "b"};  // b is excluded from weight decay

// Replays fixture `name` (tests/reference/fixtures_optim_extras.py) through
// `opt` and compares the parameters after every step and the final buffers.
void replay_sgd(const std::string& name, SGD& opt, std::vector<Tensor>& params) {
  SafetensorsFile f = load_fixture(name);
  std::vector<float> lrs = f.tensors.at("lr").to_float_vector();
  for (int step = 1; step <= 3; ++step) {
    opt.set_lr(lrs[step - 1]);
    for (size_t i = 0; i < params.size(); ++i) {
      auto it = f.tensors.find("grad." + std::to_string(step) + "." + kSgdNames[i]);
      if (it == f.tensors.end()) params[i].zero_grad();
      else params[i].set_grad(it->second.clone());
    }
    opt.step();
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_TRUE(all_close(params[i], fixture_tensor(f, "param." + std::to_string(step) + "." + kSgdNames[i]),
                            1e-6f, 1e-6f))
          << name << " step " << step << " parameter " << kSgdNames[i];
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string key = std::string("momentum_buffer.") + kSgdNames[i];
    const bool expected = f.tensors.count(key) > 0;
    ASSERT_EQ(opt.state()[i].momentum_buffer.defined(), expected) << name << " " << kSgdNames[i];
    if (expected)
      EXPECT_TRUE(all_close(opt.state()[i].momentum_buffer, fixture_tensor(f, key), 1e-6f, 1e-6f))
          << name << " " << kSgdNames[i];
  }
}

std::vector<SgdParam> sgd_params(const std::string& name, std::vector<Tensor>& params) {
  SafetensorsFile f = load_fixture(name);
  for (const char* k : kSgdNames) params.push_back(fixture_tensor(f, std::string("init.") + k, true).set_name(k));
  return {{params[0], true}, {params[1], true}, {params[2], false}};
}

}  // namespace

TEST(Sgd, MatchesPyTorchWithMomentumDampeningAndLateFirstGradient) {
  std::vector<Tensor> params;
  SgdOptions o;
  o.momentum = 0.9;
  o.dampening = 0.25;
  o.weight_decay = 0.01;
  SGD opt(sgd_params("optim_sgd_momentum", params), o);
  replay_sgd("optim_sgd_momentum", opt, params);
}

TEST(Sgd, MatchesPyTorchWithNesterov) {
  std::vector<Tensor> params;
  SgdOptions o;
  o.momentum = 0.8;
  o.weight_decay = 0.05;
  o.nesterov = true;
  SGD opt(sgd_params("optim_sgd_nesterov", params), o);
  replay_sgd("optim_sgd_nesterov", opt, params);
}

TEST(Sgd, MatchesPyTorchWithoutMomentum) {
  std::vector<Tensor> params;
  SgdOptions o;
  o.weight_decay = 0.1;
  SGD opt(sgd_params("optim_sgd_plain", params), o);
  replay_sgd("optim_sgd_plain", opt, params);
}

TEST(Sgd, HandComputedMomentumAndNesterov) {
  Tensor p = Tensor::from_vector({1.0f}, {1}).set_requires_grad(true);
  Tensor q = Tensor::from_vector({1.0f}, {1}).set_requires_grad(true);
  SgdOptions heavy;
  heavy.lr = 0.5;
  heavy.momentum = 0.5;
  SgdOptions nesterov = heavy;
  nesterov.nesterov = true;
  SGD a({p}, heavy), b({q}, nesterov);
  EXPECT_FALSE(a.state()[0].momentum_buffer.defined());
  for (int i = 0; i < 2; ++i) {
    p.set_grad(Tensor::ones({1}));
    q.set_grad(Tensor::ones({1}));
    a.step();
    b.step();
  }
  // heavy ball: b = 1, p = 0.5; then b = 1.5, p = -0.25
  EXPECT_EQ(a.state()[0].momentum_buffer.item(), 1.5f);
  EXPECT_EQ(p.item(), -0.25f);
  // nesterov: b = 1, d = 1.5, q = 0.25; then b = 1.5, d = 1.75, q = -0.625
  EXPECT_EQ(b.state()[0].momentum_buffer.item(), 1.5f);
  EXPECT_EQ(q.item(), -0.625f);

  a.zero_grad();
  EXPECT_FALSE(p.grad().defined());
  a.step();  // no gradient: nothing moves
  EXPECT_EQ(p.item(), -0.25f);
  EXPECT_EQ(a.state()[0].momentum_buffer.item(), 1.5f);
}

TEST(Sgd, LargeParameterUpdatesInParallelLikeASmallOne) {
  const int64_t n = 100000;
  Tensor big = random_tensor({n}, 5).set_requires_grad(true);
  Tensor g = random_tensor({n}, 6);
  Tensor small = big.detach().slice(0, 0, 10).clone().set_requires_grad(true);
  SgdOptions o;
  o.momentum = 0.9;
  o.weight_decay = 1e-4;
  SGD a({big}, o), b({small}, o);
  for (int i = 0; i < 2; ++i) {
    big.set_grad(g);
    small.set_grad(g.slice(0, 0, 10).clone());
    a.step();
    b.step();
  }
  EXPECT_TRUE(all_close(big.slice(0, 0, 10), small, 0.0f, 0.0f));
}

TEST(Sgd, BadSettingsAndGradientsAreErrors) {
  Tensor p = Tensor::zeros({2}).set_requires_grad(true);
  auto with = [&](std::function<void(SgdOptions&)> set) {
    SgdOptions o;
    set(o);
    SGD opt({p}, o);
  };
  expect_error([&] { with([](SgdOptions& o) { o.lr = -0.1; }); }, {"SGD: learning rate -0.1"});
  expect_error([&] { with([](SgdOptions& o) { o.momentum = -0.9; }); }, {"SGD: momentum -0.9"});
  expect_error([&] { with([](SgdOptions& o) { o.dampening = 1.5; }); }, {"SGD: dampening 1.5 must lie in [0, 1]"});
  expect_error([&] { with([](SgdOptions& o) { o.weight_decay = -1e-4; }); }, {"SGD: weight decay -0.0001"});
  expect_error([&] { with([](SgdOptions& o) { o.nesterov = true; }); }, {"SGD: nesterov momentum needs"});
  expect_error(
      [&] {
        with([](SgdOptions& o) {
          o.nesterov = true;
          o.momentum = 0.9;
          o.dampening = 0.1;
        });
      },
      {"zero dampening"});
  expect_error([] { SGD({Tensor::zeros({2}, DType::i64)}); }, {"SGD: parameter 0 is i64[2]"});

  SGD opt({p});
  opt.set_lr(-1.0);
  p.set_grad(Tensor::ones({2}));
  expect_error([&] { opt.step(); }, {"SGD: learning rate -1"});
  opt.set_lr(0.1);
  p.set_grad(Tensor::ones({3}));
  expect_error([&] { opt.step(); }, {"SGD: the gradient of parameter 0 is f32[3]"});
}
