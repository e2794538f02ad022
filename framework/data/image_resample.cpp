#include "data/image_resample.h"

#include <algorithm>
#include <cmath>

#include "tensor/error.h"

namespace cmha::data {

namespace {

// Keys' cubic convolution with a = -0.5 (PIL, PyTorch's antialiased bicubic).
double cubic(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
  return 0;
}
double triangle(double x) {
  x = std::abs(x);
  return x < 1 ? 1 - x : 0;
}

// Four f32 lanes: an RGB pixel and an unused fourth lane, one SIMD register.
typedef float f32x4 __attribute__((vector_size(16)));

// Clamped to [0, 255] and rounded half to even, as std::nearbyint in the
// default rounding mode: adding and subtracting 1.5 · 2^23 leaves no fraction
// bits, and unlike a call to nearbyint it vectorises.
inline uint8_t round_u8(float v) {
  constexpr float magic = 12582912.0f;
  return static_cast<uint8_t>((std::clamp(v, 0.0f, 255.0f) + magic) - magic);
}

// Horizontal pass of an RGB image: rows [r0, r1) → mid [r1 - r0, out_w] pixels of 4 lanes.
void horizontal_rgb(const Image& im, int64_t r0, int64_t r1, const Taps& tx, std::vector<f32x4>& mid) {
  const int64_t out_w = tx.size(), c0 = tx.lowest(), c1 = tx.highest();
  std::vector<f32x4> row(static_cast<size_t>(c1 - c0));
  mid.resize(static_cast<size_t>((r1 - r0) * out_w));
  for (int64_t y = r0; y < r1; ++y) {
    const uint8_t* src = im.at(y, c0);
    for (int64_t x = 0; x < c1 - c0; ++x)
      row[x] = f32x4{static_cast<float>(src[3 * x]), static_cast<float>(src[3 * x + 1]),
                     static_cast<float>(src[3 * x + 2]), 0.0f};
    f32x4* dst = mid.data() + (y - r0) * out_w;
    for (int64_t x = 0; x < out_w; ++x) {
      const float* w = tx.weights.data() + x * tx.max_count;
      const f32x4* s = row.data() + (tx.first[x] - c0);
      f32x4 acc = {0, 0, 0, 0};
      for (int64_t j = 0; j < tx.count[x]; ++j) acc += w[j] * s[j];
      dst[x] = acc;
    }
  }
}

// Any channel count, one channel at a time.
void horizontal_any(const Image& im, int64_t r0, int64_t r1, const Taps& tx, std::vector<float>& mid) {
  const int64_t C = im.channels, out_w = tx.size();
  mid.resize(static_cast<size_t>((r1 - r0) * out_w * C));
  for (int64_t y = r0; y < r1; ++y) {
    const uint8_t* row = im.at(y, 0);
    float* dst = mid.data() + (y - r0) * out_w * C;
    for (int64_t x = 0; x < out_w; ++x) {
      const float* w = tx.weights.data() + x * tx.max_count;
      const uint8_t* src = row + tx.first[x] * C;
      for (int64_t c = 0; c < C; ++c) {
        float acc = 0;
        for (int64_t j = 0; j < tx.count[x]; ++j) acc += w[j] * src[j * C + c];
        dst[x * C + c] = acc;
      }
    }
  }
}

// Vertical pass over rows of `lanes` floats per pixel, keeping the first C of each.
// (__restrict: a uint8_t store may alias anything, which would keep the loops scalar.)
void vertical(const float* mid, int64_t r0, int64_t out_w, int64_t lanes, const Taps& ty, Image& out) {
  const int64_t n = out_w * lanes, C = out.channels;
  std::vector<float> acc_buffer(static_cast<size_t>(n));
  std::vector<uint8_t> rounded_buffer(static_cast<size_t>(n));
  float* __restrict acc = acc_buffer.data();
  uint8_t* __restrict rounded = rounded_buffer.data();
  for (int64_t y = 0; y < ty.size(); ++y) {
    const float* w = ty.weights.data() + y * ty.max_count;
    const float* __restrict src = mid + (ty.first[y] - r0) * n;
    const float w0 = ty.count[y] > 0 ? w[0] : 0.0f;
    for (int64_t k = 0; k < n; ++k) acc[k] = w0 * src[k];  // = 0 + w0 · src, the first tap
    for (int64_t j = 1; j < ty.count[y]; ++j) {
      const float* __restrict s = mid + (ty.first[y] + j - r0) * n;
      const float wj = w[j];
      for (int64_t k = 0; k < n; ++k) acc[k] += wj * s[k];
    }
    uint8_t* __restrict dst = out.at(y, 0);
    if (lanes == C) {
      for (int64_t k = 0; k < n; ++k) dst[k] = round_u8(acc[k]);
    } else {  // round every lane (vectorised), then keep C of each pixel's lanes
      for (int64_t k = 0; k < n; ++k) rounded[k] = round_u8(acc[k]);
      for (int64_t x = 0; x < out_w; ++x)
        for (int64_t c = 0; c < C; ++c) dst[x * C + c] = rounded[x * lanes + c];
    }
  }
}

}  // namespace

int64_t Taps::lowest() const { return first.empty() ? 0 : *std::min_element(first.begin(), first.end()); }
int64_t Taps::highest() const {
  int64_t h = 0;
  for (size_t i = 0; i < first.size(); ++i) h = std::max(h, first[i] + count[i]);
  return h;
}
void Taps::shift(int64_t delta) {
  for (auto& f : first) f += delta;
}

Taps make_taps(int64_t window, double offset, double source_length, int64_t out_total, int64_t out_first,
               int64_t count, Interpolation interp) {
  const double scale = source_length / static_cast<double>(out_total);
  const double half_width = interp == Interpolation::bicubic ? 2.0 : 1.0;
  const double support = half_width * std::max(scale, 1.0);
  const double inv = scale >= 1 ? 1.0 / scale : 1.0;
  Taps t;
  t.max_count = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  t.first.resize(count), t.count.resize(count);
  t.weights.assign(static_cast<size_t>(count * t.max_count), 0.0f);
  std::vector<double> w(static_cast<size_t>(t.max_count));
  for (int64_t k = 0; k < count; ++k) {
    const int64_t i = out_first + k;
    const double center = offset + scale * (i + 0.5);
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), window);
    const int64_t n = std::clamp<int64_t>(hi - lo, 0, t.max_count);
    double total = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double x = (j + lo - center + 0.5) * inv;
      w[j] = interp == Interpolation::bicubic ? cubic(x) : triangle(x);
      total += w[j];
    }
    t.first[k] = lo, t.count[k] = n;
    for (int64_t j = 0; j < n; ++j) t.weights[k * t.max_count + j] = static_cast<float>(total != 0 ? w[j] / total : 0);
  }
  return t;
}

Taps make_taps(int64_t in, int64_t out, Interpolation interp) {
  return make_taps(in, 0.0, static_cast<double>(in), out, 0, out, interp);
}

Image resample(const Image& im, const Taps& ty, const Taps& tx) {
  const int64_t C = im.channels, out_h = ty.size(), out_w = tx.size();
  const int64_t r0 = ty.lowest(), r1 = ty.highest();
  CMHA_CHECK(out_h > 0 && out_w > 0 && r0 >= 0 && r1 <= im.height && tx.lowest() >= 0 && tx.highest() <= im.width,
             "resample: taps reading rows [" + std::to_string(r0) + ", " + std::to_string(r1) + ") and columns [" +
                 std::to_string(tx.lowest()) + ", " + std::to_string(tx.highest()) + ") of a " +
                 std::to_string(im.height) + "×" + std::to_string(im.width) + " image");
  Image out(out_h, out_w, C);
  if (C == 3) {
    std::vector<f32x4> mid;  // [r1 - r0, out_w] RGB_ pixels
    horizontal_rgb(im, r0, r1, tx, mid);
    vertical(reinterpret_cast<const float*>(mid.data()), r0, out_w, 4, ty, out);
  } else {
    std::vector<float> mid;  // [r1 - r0, out_w, C]
    horizontal_any(im, r0, r1, tx, mid);
    vertical(mid.data(), r0, out_w, C, ty, out);
  }
  return out;
}

}  // namespace cmha::data
