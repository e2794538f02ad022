#pragma once
// Scalar exp, erf, erfcx and sigmoid written so that g++ vectorises the loops
// that call them: std::exp/std::erf are opaque libm calls and keep a loop
// scalar unless -ffast-math is on (which we do not want for the rest of the
// code). Only arithmetic, comparisons, selects and bit operations (fabs,
// copysign, bit casts) are used: no branches, no libm calls.
// Accuracy (checked against std:: by tests/unit/nn_ops_test.cpp):
//   exp      ~2 ulp for normal results, subnormals to the last bit or two,
//            0 below -103.9, inf above 88.73
//   erf      2.5e-7 relative, 1.2e-7 absolute (2 ulp near ±1); ±1 for |x| ≥ 3.9
//   exp_nonpositive_ftz  as exp on [-87.33, 0]; 0 below and for NaN
//   erfcx    1e-7 relative on [0, 10]
//   sigmoid  ~2 ulp, subnormal tail included
// NaN in gives NaN out.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace cmha::cpu::vec {

#define CMHA_VEC_INLINE [[gnu::always_inline]] inline

// Horner evaluation of c0 + c1·t + c2·t² + ..., unrolled at compile time
// (a loop over a coefficient array is not always unrolled, and then the
// caller's loop does not vectorise).
CMHA_VEC_INLINE float poly(float, float c) { return c; }
template <typename... Rest>
CMHA_VEC_INLINE float poly(float t, float c0, Rest... rest) {
  return poly(t, rest...) * t + c0;
}

// Clamps written on the bit patterns, as integer min/max. A float clamp
// `x < lo ? lo : x` stays a branch for g++ (min/max would lose NaN), and it
// then specialises the code after it for the clamped constant, which in a
// vector loop means computing (and dividing) several times under masks;
// integer min/max has no such case. The callers restore NaN themselves.
// min(x, hi) for hi ≥ 0: non-negative floats order like their signed bits.
CMHA_VEC_INLINE float clamp_above(float x, float hi) {
  const int32_t i = std::bit_cast<int32_t>(x), h = std::bit_cast<int32_t>(hi);
  return std::bit_cast<float>(i > h ? h : i);
}
// max(x, lo) for lo < 0: negative floats order like their unsigned bits,
// reversed, and every non-negative float's bits are below them.
CMHA_VEC_INLINE float clamp_below(float x, float lo) {
  const uint32_t u = std::bit_cast<uint32_t>(x), l = std::bit_cast<uint32_t>(lo);
  return std::bit_cast<float>(u > l ? l : u);
}

// e^x = 2^k · e^r with k = round(x / ln 2) and |r| ≤ ln2 / 2.
CMHA_VEC_INLINE float exp(float x) {
  // Outside [-104, 89] the result is 0 or inf anyway; clamping keeps k small
  // enough for the integer tricks below.
  const float x_in = x;
  x = clamp_above(clamp_below(x, -104.0f), 89.0f);
  // Adding 1.5·2^23 rounds x/ln2 to an integer in the low mantissa bits, so k
  // comes out of a bit cast instead of a float->int conversion (undefined for NaN).
  constexpr float kShifter = 12582912.0f;  // 1.5 * 2^23
  const float t = x * 1.44269504088896341f + kShifter;
  const float kf = t - kShifter;
  const int32_t k = static_cast<int32_t>(std::bit_cast<uint32_t>(t) - std::bit_cast<uint32_t>(kShifter));
  // Cody–Waite: ln2 split so that kf * kLn2Hi is exact for |k| < 2^9.
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  float r = x - kf * kLn2Hi;
  r = r - kf * kLn2Lo;
  // e^r ≈ 1 + r·C(r), C of degree 5: our relative minimax fit on |r| ≤ ln2/2
  // (error 2e-8 with these f32 coefficients).
  const float p = 1.0f + r * poly(r, 1.000000032e+00f, 4.999999419e-01f, 1.666643080e-01f, 4.166800473e-02f,
                                  8.374195729e-03f, 1.384360680e-03f);
  // k is in [-150, 129]: scale in two halves so each power of two is a normal
  // float; the second multiply then underflows to subnormals/0 or overflows to
  // inf exactly where the true result does.
  const int32_t k1 = k >> 1, k2 = k - k1;
  const float s1 = std::bit_cast<float>(static_cast<uint32_t>(k1 + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<uint32_t>(k2 + 127) << 23);
  const float y = p * s1 * s2;
  return x_in != x_in ? x_in : y;  // NaN
}

// e^x for x ≤ 0, about a third cheaper than exp() for callers that can live
// with a flushed tail: results below FLT_MIN (x < -87.33) are 0, and so is
// the result for NaN (callers whose other terms carry the NaN, such as the
// GELU CDF). One power-of-two scale, added straight into the exponent bits.
CMHA_VEC_INLINE float exp_nonpositive_ftz(float x) {
  const uint32_t keep = 0u - static_cast<uint32_t>(x >= -87.33f);  // all ones or 0
  x = clamp_below(x, -87.33f);  // keeps the exponent arithmetic below in range
  constexpr float kShifter = 12582912.0f;
  const float t = x * 1.44269504088896341f + kShifter;
  const float kf = t - kShifter;
  const uint32_t k_bits = (std::bit_cast<uint32_t>(t) - std::bit_cast<uint32_t>(kShifter)) << 23;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  float r = x - kf * kLn2Hi;
  r = r - kf * kLn2Lo;
  const float p = 1.0f + r * poly(r, 1.000000032e+00f, 4.999999419e-01f, 1.666643080e-01f, 4.166800473e-02f,
                                  8.374195729e-03f, 1.384360680e-03f);
  // k ≥ -126, and at -126 p ≥ 1: p·2^k is a normal float.
  return std::bit_cast<float>((std::bit_cast<uint32_t>(p) + k_bits) & keep);
}

// The scaled complementary error function e^(x²)·erfc(x) for 0 ≤ x ≤ 10:
// smooth and flat (1 at 0, falling like 1/(x√π)), so a rational fits it
// well. Above 10 it returns the value at 10; callers multiply it by
// e^(-x²), which is 0 there in f32. The coefficients (all positive, so no
// cancellation) are our own: a weighted least-squares rational fit with
// Lawson reweighting towards minimax, against 30-digit mpmath values;
// relative fit error 5.6e-9.
CMHA_VEC_INLINE float erfcx(float x) {
  const float s = clamp_above(x, 10.0f) * 0.1f;
  const float y =
      poly(s, 1.000000006e+00f, 1.237588709e+01f, 7.307434076e+01f, 2.288084744e+02f, 3.271036601e+02f) /
      poly(s, 1.0f, 2.365968445e+01f, 2.400443719e+02f, 1.323761805e+03f, 4.055792739e+03f, 5.797690096e+03f);
  return x != x ? x : y;  // NaN
}

// erf(x), also handing back e^(-x²), which callers such as the exact GELU
// backward want as well. Two pieces, both evaluated and blended so the loop
// stays branch-free:
//   |x| < 1:  erf(x) = x · A(x²)          (relative accuracy near 0)
//   |x| ≥ 1:  erf(x) = 1 - e^(-x²) · erfcx(|x|)
// A is our own fit as for erfcx (relative error 1.2e-9).
CMHA_VEC_INLINE float erf(float x, float& exp_neg_x2) {
  const float ax = std::fabs(x);
  const float t = ax * ax;
  exp_neg_x2 = exp(-t);
  const float near = ax * poly(t, 1.128379166e+00f, -3.761262582e-01f, 1.128358515e-01f, -2.685381195e-02f,
                                5.188327653e-03f, -8.010192946e-04f, 7.853858049e-05f);
  const float far = 1.0f - exp_neg_x2 * erfcx(ax);
  return std::copysign(ax < 1.0f ? near : far, x);
}

CMHA_VEC_INLINE float erf(float x) {
  float unused;
  return erf(x, unused);
}

// 1 / (1 + e^-x), written with e = e^-|x| ≤ 1 so nothing overflows: for
// x < 0 it is e / (1 + e), which stays accurate down into the subnormals.
CMHA_VEC_INLINE float sigmoid(float x) {
  const float e = exp(-std::fabs(x));
  const float r = 1.0f / (1.0f + e);
  return x < 0.0f ? e * r : r;
}

// The largest of x[0..n) (-inf for n = 0; NaN elements are skipped, so a row
// holding NaN gets its NaN from the exp-sum that follows). Written as a
// ternary: with std::max g++ keeps the reduction scalar, one maxss latency
// per element (about 8x slower: 1.1 ns against 0.14 ns an element, measured).
CMHA_VEC_INLINE float row_max(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

#undef CMHA_VEC_INLINE

}  // namespace cmha::cpu::vec
