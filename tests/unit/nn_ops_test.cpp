// softmax, log_softmax, layer_norm, relu, gelu and dropout, plus the
// vectorisable math they run on: PyTorch comparisons, gradient checks, large
// (multi-threaded) shapes against double-precision references, and errors.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/cpu/vec_math.h"
#include "support/check.h"
#include "support/threads.h"

using namespace cmha;
using namespace cmha::test;

namespace {

using In = const std::vector<Tensor>&;

using cmha::test::with_threads;

// The error `f` raises must be a cmha::Error whose message has every piece.
template <typename F>
::testing::AssertionResult raises(F f, std::vector<std::string> pieces) {
  try {
    f();
  } catch (const Error& e) {
    for (const auto& p : pieces)
      if (std::string(e.what()).find(p) == std::string::npos)
        return ::testing::AssertionFailure() << "message \"" << e.what() << "\" lacks \"" << p << "\"";
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no cmha::Error raised";
}

bool bitwise_equal(const Tensor& a, const Tensor& b) { return a.to_float_vector() == b.to_float_vector(); }

// |a - b| <= rel·|b| + abs, with NaN matching NaN and infinities matching exactly.
bool within_tolerance(float a, double b, double rel, double abs) {
  if (std::isnan(b)) return std::isnan(a);
  if (std::isinf(b)) return a == b;
  return std::fabs(a - b) <= rel * std::fabs(b) + abs;
}

constexpr double kSubnormalSlack = 3e-45;  // two steps of the smallest subnormal

}  // namespace

// ---- vec_math ----

TEST(VecMath, ExpMatchesStd) {
  std::vector<float> xs;
  for (double x = -110.0; x < 95.0; x += 7.3e-4) xs.push_back(static_cast<float>(x));
  for (float x : {0.0f, -0.0f, 88.7228f, 88.72284f, 88.7229f, -87.33654f, -87.3366f, -103.97f, -103.98f, -150.0f,
                  1e30f, -1e30f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), 1e-30f, -1e-30f})
    xs.push_back(x);
  for (float x : xs) {
    const double want = std::exp(static_cast<double>(x));
    const float got = cpu::vec::exp(x);
    // Rounded to f32, e^x overflows above 88.7228 and is subnormal below -87.34.
    const double want_f = static_cast<float>(want);
    ASSERT_TRUE(within_tolerance(got, want_f, 1e-6, kSubnormalSlack)) << "exp(" << x << ") = " << got << ", std " << want_f;
  }
  EXPECT_EQ(cpu::vec::exp(-200.0f), 0.0f);
  EXPECT_EQ(cpu::vec::exp(100.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(cpu::vec::exp(0.0f), 1.0f);
}

TEST(VecMath, ExpNonpositiveFtzMatchesStdAboveTheFlush) {
  for (double x = -95.0; x <= 0.0; x += 3.1e-4) {
    const float xf = static_cast<float>(x);
    const float got = cpu::vec::exp_nonpositive_ftz(xf);
    if (xf < -87.33f) {
      ASSERT_EQ(got, 0.0f) << xf;
    } else {
      const double want = static_cast<float>(std::exp(static_cast<double>(xf)));
      ASSERT_TRUE(within_tolerance(got, want, 1e-6, 0)) << "exp(" << xf << ") = " << got << ", std " << want;
    }
  }
  EXPECT_EQ(cpu::vec::exp_nonpositive_ftz(0.0f), 1.0f);
  EXPECT_EQ(cpu::vec::exp_nonpositive_ftz(-0.0f), 1.0f);
  EXPECT_EQ(cpu::vec::exp_nonpositive_ftz(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(cpu::vec::exp_nonpositive_ftz(std::numeric_limits<float>::quiet_NaN()), 0.0f);
}

TEST(VecMath, ErfMatchesStd) {
  double worst_abs = 0;
  for (double x = -8.0; x < 8.0; x += 1.1e-5) {
    const float xf = static_cast<float>(x);
    const double want = std::erf(static_cast<double>(xf));
    const float got = cpu::vec::erf(xf);
    ASSERT_TRUE(within_tolerance(got, want, 1e-6, 1.5e-7)) << "erf(" << xf << ") = " << got << ", std " << want;
    worst_abs = std::max(worst_abs, std::fabs(got - want));
  }
  EXPECT_LE(worst_abs, 1.5e-7);
  // Tiny arguments: relative accuracy, no flush to zero.
  for (float x : {1e-30f, 1e-10f, 3e-5f, -2e-7f})
    EXPECT_TRUE(within_tolerance(cpu::vec::erf(x), std::erf(static_cast<double>(x)), 1e-6, 0)) << x;
  EXPECT_EQ(cpu::vec::erf(4.0f), 1.0f);
  EXPECT_EQ(cpu::vec::erf(-30.0f), -1.0f);
  EXPECT_EQ(cpu::vec::erf(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_EQ(cpu::vec::erf(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_TRUE(std::signbit(cpu::vec::erf(-0.0f)));
  EXPECT_TRUE(std::isnan(cpu::vec::erf(std::numeric_limits<float>::quiet_NaN())));
}

TEST(VecMath, ErfHandsBackExpOfMinusSquare) {
  for (double x = -11.0; x < 11.0; x += 1.3e-4) {
    const float xf = static_cast<float>(x);
    float e;
    cpu::vec::erf(xf, e);
    const double want = static_cast<float>(std::exp(-static_cast<double>(xf) * xf));
    // x² is rounded to f32 first: its relative error 6e-8 costs 6e-8·x² in e.
    ASSERT_TRUE(within_tolerance(e, want, 1e-6 + 6e-8 * x * x, kSubnormalSlack)) << xf << ": " << e << " vs " << want;
  }
}

TEST(VecMath, ErfcxMatchesStd) {
  for (double x = 0.0; x <= 10.0; x += 3.7e-5) {
    const float xf = static_cast<float>(x);
    const double want = std::erfc(static_cast<double>(xf)) * std::exp(static_cast<double>(xf) * xf);
    ASSERT_TRUE(within_tolerance(cpu::vec::erfcx(xf), want, 1e-6, 0)) << "erfcx(" << xf << ") = " << cpu::vec::erfcx(xf)
                                                          << ", std " << want;
  }
  EXPECT_EQ(cpu::vec::erfcx(0.0f), 1.0f);
  EXPECT_TRUE(std::isfinite(cpu::vec::erfcx(1e30f)));  // clamped: callers scale it by e^(-x²) = 0
  EXPECT_TRUE(std::isnan(cpu::vec::erfcx(std::numeric_limits<float>::quiet_NaN())));
}

TEST(VecMath, SigmoidMatchesStd) {
  for (double x = -120.0; x < 120.0; x += 1.7e-3) {
    const float xf = static_cast<float>(x);
    const double want = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(xf))));
    ASSERT_TRUE(within_tolerance(cpu::vec::sigmoid(xf), want, 1e-6, kSubnormalSlack)) << xf;
  }
}

// ---- softmax / log_softmax ----

TEST(SoftmaxOp, MatchesPyTorch) {
  EXPECT_TRUE(matches_fixture("softmax_last", [](auto& in) { return softmax(in.at("x"), -1); }));
  EXPECT_TRUE(matches_fixture("softmax_dim1", [](auto& in) { return softmax(in.at("x"), 1); }));
  EXPECT_TRUE(matches_fixture("log_softmax_last", [](auto& in) { return log_softmax(in.at("x")); }));
  EXPECT_TRUE(matches_fixture("log_softmax_dim0", [](auto& in) { return log_softmax(in.at("x"), 0); }));
}

TEST(SoftmaxOp, Gradcheck) {
  auto a = [] { return random_tensor({3, 5}, 41, -2, 2, true); };
  auto b = [] { return random_tensor({2, 3, 4}, 42, -2, 2, true); };
  EXPECT_TRUE(gradcheck([](In x) { return softmax(x[0], -1); }, {a()}));
  EXPECT_TRUE(gradcheck([](In x) { return softmax(x[0], 1); }, {b()}));
  EXPECT_TRUE(gradcheck([](In x) { return softmax(x[0], 0); }, {b()}));
  EXPECT_TRUE(gradcheck([](In x) { return log_softmax(x[0], -1); }, {a()}));
  EXPECT_TRUE(gradcheck([](In x) { return log_softmax(x[0], 1); }, {b()}));
  EXPECT_TRUE(gradcheck([](In x) { return log_softmax(x[0].transpose(0, 2), 0); }, {b()}));
}

TEST(SoftmaxOp, StableForLargeInputs) {
  // Multiples of 1/64 stay exact when shifted by ±1000, so the shift is the only change.
  std::vector<float> v(36);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 37) % 64) / 16.0f - 2.0f;
  Tensor x = Tensor::from_vector(v, {4, 9});
  EXPECT_TRUE(all_close(softmax(add_scalar(x, 1000.0f)), softmax(x), 1e-7f, 1e-6f));
  // log_softmax keeps the shifted values' absolute rounding (ulp(1000) = 6e-5).
  EXPECT_TRUE(all_close(log_softmax(add_scalar(x, -1000.0f)), log_softmax(x), 1e-4f, 0));
  Tensor wide = Tensor::from_vector({1e4f, 0.0f, -1e4f}, {1, 3});
  EXPECT_EQ(softmax(wide).to_float_vector(), (std::vector<float>{1.0f, 0.0f, 0.0f}));
  EXPECT_EQ(log_softmax(wide).to_float_vector(), (std::vector<float>{0.0f, -1e4f, -2e4f}));
  // Masked (-inf) entries get probability 0 and a finite neighbour keeps the row finite.
  const float inf = std::numeric_limits<float>::infinity();
  Tensor masked = Tensor::from_vector({0.0f, -inf, 0.0f}, {3});
  EXPECT_EQ(softmax(masked).to_float_vector(), (std::vector<float>{0.5f, 0.0f, 0.5f}));
}

TEST(SoftmaxOp, LargeRowsMatchDoubleReferenceForAnyThreadCount) {
  const int64_t rows = 64, n = 1024;  // 65536 elements: the parallel path
  Tensor x = random_tensor({rows, n}, 44, -8, 8, true);
  Tensor g = random_tensor({rows, n}, 45);
  auto run = [&](bool log) {
    x.zero_grad();
    Tensor y = log ? log_softmax(x) : softmax(x);
    y.backward(g);
    return std::make_pair(y.detach(), x.grad());
  };
  for (bool log : {false, true}) {
    auto [y1, dx1] = with_threads(1, [&] { return run(log); });
    auto [y2, dx2] = with_threads(2, [&] { return run(log); });
    EXPECT_TRUE(bitwise_equal(y1, y2));
    EXPECT_TRUE(bitwise_equal(dx1, dx2));
    const std::vector<float> xv = x.to_float_vector(), gv = g.to_float_vector();
    std::vector<float> want_y(xv.size()), want_dx(xv.size());
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = xv.data() + r * n;
      const float* gr = gv.data() + r * n;
      double m = -INFINITY, sum = 0, gsum = 0, gy = 0;
      for (int64_t j = 0; j < n; ++j) m = std::max(m, static_cast<double>(xr[j]));
      for (int64_t j = 0; j < n; ++j) sum += std::exp(xr[j] - m);
      for (int64_t j = 0; j < n; ++j) {
        const double p = std::exp(xr[j] - m) / sum;
        gsum += gr[j];
        gy += gr[j] * p;
      }
      for (int64_t j = 0; j < n; ++j) {
        const double p = std::exp(xr[j] - m) / sum;
        want_y[r * n + j] = static_cast<float>(log ? (xr[j] - m) - std::log(sum) : p);
        want_dx[r * n + j] = static_cast<float>(log ? gr[j] - p * gsum : p * (gr[j] - gy));
      }
    }
    EXPECT_TRUE(all_close(y1, Tensor::from_vector(want_y, {rows, n}), 1e-6f, 1e-5f)) << "log " << log;
    EXPECT_TRUE(all_close(dx1, Tensor::from_vector(want_dx, {rows, n}), 1e-6f, 1e-4f)) << "log " << log;
  }
}

TEST(SoftmaxOp, InnerDimMatchesMovingItLast) {
  // dim 1 of [3, 70, 130]: 130 columns span two full blocks and a partial one.
  Tensor x = random_tensor({3, 70, 130}, 46, -4, 4, true);
  Tensor g = random_tensor({3, 70, 130}, 47);
  for (bool log : {false, true}) {
    auto op = [log](const Tensor& t, int64_t d) { return log ? log_softmax(t, d) : softmax(t, d); };
    x.zero_grad();
    Tensor y = op(x, 1);
    y.backward(g);
    Tensor dx = x.grad();
    x.zero_grad();
    Tensor y_ref = op(x.transpose(1, 2).contiguous(), -1).transpose(1, 2);
    y_ref.backward(g);
    EXPECT_TRUE(all_close(y, y_ref, 1e-7f, 1e-6f)) << "log " << log;
    // log_softmax's dx = g - p·Σg cancels: compare at the scale of Σg's rounding.
    EXPECT_TRUE(all_close(dx, x.grad(), 2e-6f, 1e-5f)) << "log " << log;
  }
  // A strided input gives what its contiguous copy gives.
  Tensor t = random_tensor({5, 6}, 48);
  EXPECT_TRUE(all_close(softmax(t.transpose(0, 1), 0), softmax(t.transpose(0, 1).contiguous(), 0), 0, 0));
  // A scalar is a one-element row.
  EXPECT_EQ(softmax(Tensor::scalar(3.0f)).item(), 1.0f);
}

TEST(SoftmaxOp, Errors) {
  EXPECT_TRUE(raises([] { softmax(Tensor::zeros({2, 3}, DType::i64)); }, {"softmax", "i64[2, 3]"}));
  EXPECT_TRUE(raises([] { log_softmax(Tensor::zeros({2, 3}, DType::f16)); }, {"log_softmax", "f16[2, 3]"}));
  EXPECT_TRUE(raises([] { softmax(Tensor::zeros({2, 3}), 2); }, {"softmax", "dim 2", "f32[2, 3]"}));
  EXPECT_TRUE(raises([] { log_softmax(Tensor::zeros({2, 3}), -3); }, {"log_softmax", "dim -3"}));
  EXPECT_TRUE(raises([] { softmax(Tensor::scalar(1.0f), 1); }, {"softmax", "dim 1", "f32[]"}));
}

// ---- layer_norm ----

TEST(LayerNormOp, MatchesPyTorch) {
  EXPECT_TRUE(matches_fixture("layer_norm_affine",
                              [](auto& in) { return layer_norm(in.at("x"), in.at("w"), in.at("b"), 1e-5f); }));
  EXPECT_TRUE(matches_fixture("layer_norm_plain", [](auto& in) { return layer_norm(in.at("x"), {}, {}, 1e-5f); }));
  EXPECT_TRUE(matches_fixture("layer_norm_weight_only",
                              [](auto& in) { return layer_norm(in.at("x"), in.at("w"), {}, 1e-3f); }));
}

TEST(LayerNormOp, Gradcheck) {
  auto x = [] { return random_tensor({2, 3, 4}, 51, -2, 2, true); };
  auto w = [] { return random_tensor({4}, 52, 0.5f, 1.5f, true); };
  auto b = [] { return random_tensor({4}, 53, -1, 1, true); };
  EXPECT_TRUE(gradcheck([](In t) { return layer_norm(t[0], t[1], t[2]); }, {x(), w(), b()}));
  EXPECT_TRUE(gradcheck([](In t) { return layer_norm(t[0], {}, {}); }, {x()}));
  EXPECT_TRUE(gradcheck([](In t) { return layer_norm(t[0], t[1], {}); }, {x(), w()}));
  EXPECT_TRUE(gradcheck([](In t) { return layer_norm(t[0], {}, t[1]); }, {x(), b()}));
  // Only the parameters require grad; x is strided.
  Tensor xf = random_tensor({4, 3}, 54);
  EXPECT_TRUE(gradcheck([xf](In t) { return layer_norm(xf.transpose(0, 1), t[0], t[1]); }, {w(), b()}));
}

TEST(LayerNormOp, LargeMatchesDoubleReferenceForAnyThreadCount) {
  const int64_t rows = 96, d = 512;  // 49152 elements: the parallel path
  // A mean far from 0 relative to the spread checks the two-pass statistics.
  Tensor x = random_tensor({rows, d}, 55, 99.0f, 101.0f, true);
  Tensor w = random_tensor({d}, 56, 0.5f, 1.5f, true), b = random_tensor({d}, 57, -1, 1, true);
  Tensor g = random_tensor({rows, d}, 58);
  auto run = [&] {
    x.zero_grad();
    w.zero_grad();
    b.zero_grad();
    Tensor y = layer_norm(x, w, b, 1e-5f);
    y.backward(g);
    return std::vector<Tensor>{y.detach(), x.grad(), w.grad(), b.grad()};
  };
  const auto one = with_threads(1, run), two = with_threads(2, run);
  for (size_t k = 0; k < one.size(); ++k) EXPECT_TRUE(bitwise_equal(one[k], two[k])) << "output " << k;

  const std::vector<float> xv = x.to_float_vector(), wv = w.to_float_vector(), bv = b.to_float_vector(),
                           gv = g.to_float_vector();
  std::vector<float> want_y(rows * d), want_dx(rows * d);
  std::vector<double> dw(d, 0.0), db(d, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0, a = 0, c = 0;
    for (int64_t j = 0; j < d; ++j) mu += xv[r * d + j];
    mu /= d;
    for (int64_t j = 0; j < d; ++j) var += (xv[r * d + j] - mu) * (xv[r * d + j] - mu);
    const double rs = 1.0 / std::sqrt(var / d + 1e-5);
    for (int64_t j = 0; j < d; ++j) {
      const double xh = (xv[r * d + j] - mu) * rs, gh = gv[r * d + j] * wv[j];
      want_y[r * d + j] = static_cast<float>(xh * wv[j] + bv[j]);
      a += gh;
      c += gh * xh;
      dw[j] += gv[r * d + j] * xh;
      db[j] += gv[r * d + j];
    }
    for (int64_t j = 0; j < d; ++j) {
      const double xh = (xv[r * d + j] - mu) * rs, gh = gv[r * d + j] * wv[j];
      want_dx[r * d + j] = static_cast<float>(rs * (gh - a / d - xh * c / d));
    }
  }
  EXPECT_TRUE(all_close(one[0], Tensor::from_vector(want_y, {rows, d}), 1e-4f, 1e-4f));
  EXPECT_TRUE(all_close(one[1], Tensor::from_vector(want_dx, {rows, d}), 1e-3f, 1e-3f));
  EXPECT_TRUE(all_close(one[2], Tensor::from_vector(std::vector<float>(dw.begin(), dw.end()), {d}), 1e-3f, 1e-4f));
  EXPECT_TRUE(all_close(one[3], Tensor::from_vector(std::vector<float>(db.begin(), db.end()), {d}), 1e-4f, 1e-5f));
}

TEST(LayerNormOp, Errors) {
  Tensor x = Tensor::zeros({2, 3});
  EXPECT_TRUE(raises([] { layer_norm(Tensor::zeros({2, 3}, DType::i32), {}, {}); }, {"layer_norm", "i32[2, 3]"}));
  EXPECT_TRUE(raises([&] { layer_norm(x, Tensor::ones({4}), {}); }, {"layer_norm", "weight", "f32[4]", "f32[2, 3]"}));
  EXPECT_TRUE(raises([&] { layer_norm(x, Tensor::ones({1, 3}), {}); }, {"layer_norm", "weight", "f32[1, 3]"}));
  EXPECT_TRUE(raises([&] { layer_norm(x, {}, Tensor::zeros({3}, DType::bf16)); }, {"layer_norm", "bias", "bf16[3]"}));
  EXPECT_TRUE(raises([] { layer_norm(Tensor::scalar(1.0f), {}, {}); }, {"layer_norm", "f32[]"}));
  EXPECT_TRUE(raises([&] { layer_norm(x, {}, {}, -1.0f); }, {"layer_norm", "eps", "-1"}));
}

// ---- relu / gelu ----

TEST(ActivationOps, MatchPyTorch) {
  EXPECT_TRUE(matches_fixture("relu", [](auto& in) { return relu(in.at("x")); }));
  EXPECT_TRUE(matches_fixture("gelu_erf", [](auto& in) { return gelu(in.at("x")); }));
  EXPECT_TRUE(matches_fixture("gelu_tanh", [](auto& in) { return gelu(in.at("x"), true); }));
}

TEST(ActivationOps, Gradcheck) {
  // relu's kink at 0 must stay further than the step eps from every point.
  Tensor r = Tensor::from_vector({-1.5f, -0.4f, 0.3f, 0.9f, -0.05f, 0.07f, 2.0f, -3.0f, 0.5f}, {3, 3});
  r.set_requires_grad(true);
  EXPECT_TRUE(gradcheck([](In x) { return relu(x[0]); }, {r}));
  auto g = [] { return random_tensor({3, 5}, 61, -4, 4, true); };
  EXPECT_TRUE(gradcheck([](In x) { return gelu(x[0]); }, {g()}));
  EXPECT_TRUE(gradcheck([](In x) { return gelu(x[0], true); }, {g()}));
  EXPECT_TRUE(gradcheck([](In x) { return gelu(x[0].transpose(0, 1), true); }, {g()}));
}

TEST(ActivationOps, GeluMatchesDoubleReferenceOnASweep) {
  const int64_t n = 200000;  // parallel path; x from -12 to 12
  std::vector<float> xv(n);
  for (int64_t i = 0; i < n; ++i) xv[i] = -12.0f + 24.0f * static_cast<float>(i) / n;
  Tensor x = Tensor::from_vector(xv, {n});
  x.set_requires_grad(true);
  for (bool approx : {false, true}) {
    x.zero_grad();
    Tensor y = gelu(x, approx);
    y.backward(Tensor::ones({n}));
    const std::vector<float> yv = y.to_float_vector(), dv = x.grad().to_float_vector();
    for (int64_t i = 0; i < n; ++i) {
      const double v = xv[i];
      double want_y, want_d;
      if (approx) {
        const double k = std::sqrt(2.0 / std::numbers::pi), u = k * (v + 0.044715 * v * v * v), t = std::tanh(u);
        want_y = 0.5 * v * (1 + t);
        want_d = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * 0.044715 * v * v);
      } else {
        const double cdf = 0.5 * (1 + std::erf(v / std::sqrt(2.0)));
        want_y = v * cdf;
        want_d = cdf + v * std::exp(-0.5 * v * v) / std::sqrt(2 * std::numbers::pi);
      }
      ASSERT_TRUE(within_tolerance(yv[i], want_y, 2e-6, 2e-6)) << "approx " << approx << " gelu(" << v << ") = " << yv[i]
                                                    << " vs " << want_y;
      ASSERT_TRUE(within_tolerance(dv[i], want_d, 2e-6, 2e-6)) << "approx " << approx << " gelu'(" << v << ") = " << dv[i]
                                                    << " vs " << want_d;
    }
  }
  // Huge finite inputs: the cubic and x² overflow inside, the results must
  // not (PyTorch's tanh form gives NaN gradients there).
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(gelu(Tensor::from_vector({inf}, {1}), true).item(), inf);
  EXPECT_EQ(gelu(Tensor::from_vector({inf}, {1})).item(), inf);
  for (bool approx : {false, true}) {
    Tensor huge = Tensor::from_vector({-1e30f, 1e30f}, {2});
    huge.set_requires_grad(true);
    Tensor y = gelu(huge, approx);
    EXPECT_EQ(y.to_float_vector(), (std::vector<float>{0.0f, 1e30f})) << approx;
    y.backward(Tensor::ones({2}));
    const std::vector<float> d = huge.grad().to_float_vector();
    EXPECT_NEAR(d[0], 0.0f, 1e-30f) << approx;
    EXPECT_EQ(d[1], 1.0f) << approx;
  }
}

TEST(ActivationOps, ReluKeepsNaNAndZeroesNegatives) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> y = relu(Tensor::from_vector({-2.0f, 0.0f, 3.0f, nan}, {4})).to_float_vector();
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 3.0f);
  EXPECT_TRUE(std::isnan(y[3]));
}

TEST(ActivationOps, Errors) {
  EXPECT_TRUE(raises([] { relu(Tensor::zeros({2}, DType::i32)); }, {"relu", "i32[2]"}));
  EXPECT_TRUE(raises([] { gelu(Tensor::zeros({2, 2}, DType::f16)); }, {"gelu", "f16[2, 2]"}));
  EXPECT_TRUE(raises([] { gelu(Tensor::zeros({3}, DType::i64), true); }, {"gelu", "i64[3]"}));
}

// ---- dropout ----

namespace {
// The keep decision the documented counter layout gives element i of a call
// whose reservation starts at `base` (see dropout.cpp).
bool reference_keep(int64_t i, int64_t n, uint64_t base, const Generator& gen, float p) {
  const int64_t whole = n / 256 * 256;
  uint64_t counter;
  int word;
  if (i < whole) {  // element 256q + 64l + j: word l of counter base + 64q + j
    counter = base + static_cast<uint64_t>(i / 256) * 64 + static_cast<uint64_t>(i % 64);
    word = static_cast<int>((i % 256) / 64);
  } else {  // the tail: element whole + t: word t%4 of counter base + whole/4 + t/4
    counter = base + static_cast<uint64_t>(whole / 4) + static_cast<uint64_t>((i - whole) / 4);
    word = static_cast<int>((i - whole) % 4);
  }
  return uint_to_unit(philox_block(counter, gen.key())[word]) >= p;
}
}  // namespace

TEST(DropoutOp, KeptFractionScaleAndBackward) {
  const int64_t n = 100000;
  const float p = 0.3f;
  Tensor x = random_tensor({n}, 71, 0.5f, 1.5f, true);  // never 0: a zero output means dropped
  Generator gen(1234);
  Tensor y = dropout(x, p, true, gen);
  Tensor g = random_tensor({n}, 72);
  y.backward(g);
  const std::vector<float> xv = x.to_float_vector(), yv = y.to_float_vector(), gv = g.to_float_vector(),
                           dv = x.grad().to_float_vector();
  const float scale = 1.0f / (1.0f - p);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = yv[i] != 0.0f;
    kept += keep;
    if (keep) ASSERT_NEAR(yv[i], xv[i] / (1.0f - p), 1e-6f * yv[i]) << i;
    ASSERT_EQ(dv[i], keep ? gv[i] * scale : 0.0f) << i;
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - p, 0.01);
}

TEST(DropoutOp, MaskFollowsTheCounterLayout) {
  // Whole groups of 256 with tails of 64 and 232, above and below the parallel threshold.
  for (int64_t n : {int64_t{40000}, int64_t{1000}, int64_t{100}, int64_t{3}}) {
    Generator gen(99);
    gen.reserve(10);  // a non-zero starting offset
    const uint64_t base = gen.offset();
    Tensor y = dropout(Tensor::ones({n}), 0.5f, true, gen);
    EXPECT_EQ(gen.offset(), base + static_cast<uint64_t>((n + 3) / 4));
    const std::vector<float> yv = y.to_float_vector();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(yv[i] != 0.0f, reference_keep(i, n, base, gen, 0.5f)) << n << " " << i;
  }
  // Counters whose low word wraps inside one call.
  Generator gen(7);
  gen.set_state(7, (uint64_t{1} << 32) - 30);
  const uint64_t base = gen.offset();
  const int64_t n = 1000;
  const std::vector<float> yv = dropout(Tensor::ones({n}), 0.5f, true, gen).to_float_vector();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(yv[i] != 0.0f, reference_keep(i, n, base, gen, 0.5f)) << i;
}

TEST(DropoutOp, SameSeedSameMaskWhateverTheThreadCount) {
  Tensor x = Tensor::ones({300, 337});  // 101100 elements, not a multiple of 256
  auto draw = [&](uint64_t seed, int threads) {
    return with_threads(threads, [&] {
      Generator gen(seed);
      return dropout(x, 0.4f, true, gen);
    });
  };
  Tensor a = draw(5, 1);
  EXPECT_TRUE(bitwise_equal(a, draw(5, 1)));
  EXPECT_TRUE(bitwise_equal(a, draw(5, 2)));
  EXPECT_FALSE(bitwise_equal(a, draw(6, 2)));
  // The generator advances: two calls in a row draw different masks.
  Generator gen(5);
  Tensor first = dropout(x, 0.4f, true, gen), second = dropout(x, 0.4f, true, gen);
  EXPECT_TRUE(bitwise_equal(first, a));
  EXPECT_FALSE(bitwise_equal(first, second));
}

TEST(DropoutOp, IdentityZeroAndStrided) {
  Generator gen(3);
  Tensor x = random_tensor({4, 5}, 73, -1, 1, true);
  EXPECT_TRUE(dropout(x, 0.5f, false, gen).same(x));
  EXPECT_TRUE(dropout(x, 0.0f, true, gen).same(x));
  EXPECT_EQ(gen.offset(), 0u);  // nothing drawn
  Tensor z = dropout(x, 1.0f, true, gen);
  EXPECT_EQ(z.to_float_vector(), std::vector<float>(20, 0.0f));
  z.backward(Tensor::ones({4, 5}));
  EXPECT_EQ(x.grad().to_float_vector(), std::vector<float>(20, 0.0f));
  // A strided input is masked in its logical element order.
  Tensor t = random_tensor({6, 7}, 74, 0.5f, 1.5f);
  Generator g1(8), g2(8);
  EXPECT_TRUE(bitwise_equal(dropout(t.transpose(0, 1), 0.5f, true, g1),
                            dropout(t.transpose(0, 1).contiguous(), 0.5f, true, g2)));
}

TEST(DropoutOp, Gradcheck) {
  // Each evaluation restarts the generator, so every one sees the same mask.
  auto fn = [](In x) {
    Generator gen(77);
    return dropout(x[0], 0.3f, true, gen);
  };
  EXPECT_TRUE(gradcheck(fn, {random_tensor({3, 5}, 75, -1, 1, true)}));
}

TEST(DropoutOp, Errors) {
  Generator gen(1);
  Tensor x = Tensor::ones({2, 2});
  EXPECT_TRUE(raises([&] { dropout(x, -0.1f, true, gen); }, {"dropout", "p", "-0.1"}));
  EXPECT_TRUE(raises([&] { dropout(x, 1.5f, false, gen); }, {"dropout", "p", "1.5"}));
  EXPECT_TRUE(raises([&] { dropout(x, std::nanf(""), true, gen); }, {"dropout", "nan"}));
  EXPECT_TRUE(raises([&] { dropout(Tensor::zeros({2}, DType::i64), 0.5f, true, gen); }, {"dropout", "i64[2]"}));
}
