#include "data/rand_augment.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstdlib>

#include "tensor/error.h"

namespace cmha::data {

namespace {

uint8_t clamp_trunc(float v) { return static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f)); }

// torchvision's _blend: ratio · a + (1 - ratio) · b, clamped, truncated to uint8.
void blend_with(Image& im, const std::vector<float>& other, float ratio) {
  for (size_t i = 0; i < im.pixels.size(); ++i)
    im.pixels[i] = clamp_trunc(ratio * im.pixels[i] + (1.0f - ratio) * other[i]);
}

// The same with a constant second image.
void blend_with(Image& im, float other, float ratio) {
  const float base = (1.0f - ratio) * other;
  for (auto& p : im.pixels) p = clamp_trunc(ratio * p + base);
}

// torchvision's rgb_to_grayscale on uint8: 0.2989 R + 0.587 G + 0.114 B, truncated.
uint8_t grey_of(const uint8_t* p) {
  return static_cast<uint8_t>(0.2989f * p[0] + 0.587f * p[1] + 0.114f * p[2]);
}

}  // namespace

RandAugmentConfig parse_rand_augment(const std::string& spec) {
  RandAugmentConfig c;
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dash; (dash = spec.find('-', start)) != std::string::npos; start = dash + 1)
    parts.push_back(spec.substr(start, dash - start));
  parts.push_back(spec.substr(start));
  const std::string hint = "data.rand_augment '" + spec + "' is not a RandAugment spec such as rand-m9-mstd0.5-inc1";
  CMHA_CHECK(parts[0] == "rand", hint + " (it must start with 'rand')");
  c.magnitude_std = 0;  // timm's default when no mstd section is given
  c.increasing = false;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    size_t key_len = 0;
    while (key_len < p.size() && std::isalpha(static_cast<unsigned char>(p[key_len]))) ++key_len;
    const std::string key = p.substr(0, key_len), value = p.substr(key_len);
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    CMHA_CHECK(!value.empty() && end && *end == '\0', hint + " (section '" + p + "' has no number)");
    if (key == "m")
      c.magnitude = static_cast<float>(v);
    else if (key == "n")
      c.num_ops = static_cast<int>(v);
    else if (key == "mstd")
      c.magnitude_std = static_cast<float>(v);
    else if (key == "mmax")
      c.magnitude_max = static_cast<float>(v);
    else if (key == "inc")
      c.increasing = v != 0;
    else if (key == "p")
      c.prob = static_cast<float>(v);
    else
      throw Error(hint + " (unknown section '" + p + "'; known: m, n, mstd, mmax, inc, p)");
  }
  CMHA_CHECK(c.increasing, hint + " (only the increasing op set, inc1, is implemented)");
  CMHA_CHECK(c.num_ops >= 0 && c.magnitude >= 0 && c.magnitude_std >= 0 && c.prob >= 0 && c.prob <= 1,
             hint + " (n, m and mstd must be non-negative and p in [0, 1])");
  return c;
}

// ---- pixel ops ----

void auto_contrast(Image& im) {
  const int64_t C = im.channels, n = im.height * im.width;
  for (int64_t c = 0; c < C; ++c) {
    uint8_t lo = 255, hi = 0;
    for (int64_t i = 0; i < n; ++i) lo = std::min(lo, im.pixels[i * C + c]), hi = std::max(hi, im.pixels[i * C + c]);
    const float minimum = hi > lo ? lo : 0.0f, scale = hi > lo ? 255.0f / static_cast<float>(hi - lo) : 1.0f;
    for (int64_t i = 0; i < n; ++i) im.pixels[i * C + c] = clamp_trunc((im.pixels[i * C + c] - minimum) * scale);
  }
}

void equalize(Image& im) {
  const int64_t C = im.channels, n = im.height * im.width;
  for (int64_t c = 0; c < C; ++c) {
    int64_t hist[256] = {};
    for (int64_t i = 0; i < n; ++i) ++hist[im.pixels[i * C + c]];
    // step = (pixels - count of the last non-empty bin) / 255, as PIL and torchvision.
    int64_t last = 255;
    while (last > 0 && hist[last] == 0) --last;
    const int64_t step = (n - hist[last]) / 255;
    if (step == 0) continue;
    uint8_t lut[256];
    int64_t cum = 0;
    for (int v = 0; v < 256; ++v) {
      lut[v] = static_cast<uint8_t>(std::min<int64_t>((cum + step / 2) / step, 255));
      cum += hist[v];
    }
    for (int64_t i = 0; i < n; ++i) im.pixels[i * C + c] = lut[im.pixels[i * C + c]];
  }
}

void invert(Image& im) {
  for (auto& p : im.pixels) p = static_cast<uint8_t>(255 - p);
}

void posterize(Image& im, int bits) {
  if (bits >= 8) return;
  const auto mask = static_cast<uint8_t>(bits <= 0 ? 0 : (0xFF << (8 - bits)) & 0xFF);
  for (auto& p : im.pixels) p &= mask;
}

void solarize(Image& im, int threshold) {
  for (auto& p : im.pixels)
    if (p >= threshold) p = static_cast<uint8_t>(255 - p);
}

void solarize_add(Image& im, int add, int threshold) {
  for (auto& p : im.pixels)
    if (p < threshold) p = static_cast<uint8_t>(std::min(255, p + add));
}

void adjust_brightness(Image& im, float factor) {
  blend_with(im, 0.0f, factor);
}

void adjust_color(Image& im, float factor) {
  if (im.channels != 3) return;  // a grey image has no saturation
  std::vector<float> grey(im.pixels.size());
  for (size_t i = 0; i < grey.size(); i += 3) grey[i] = grey[i + 1] = grey[i + 2] = grey_of(&im.pixels[i]);
  blend_with(im, grey, factor);
}

void adjust_contrast(Image& im, float factor) {
  const int64_t n = im.height * im.width;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += im.channels == 3 ? grey_of(&im.pixels[i * 3]) : im.pixels[i * im.channels];
  const auto mean = static_cast<float>(sum / static_cast<double>(n));
  blend_with(im, mean, factor);
}

void adjust_sharpness(Image& im, float factor) {
  const int64_t H = im.height, W = im.width, C = im.channels;
  if (H <= 2 || W <= 2) return;
  // The degenerate image: interior pixels smoothed by [[1 1 1] [1 5 1] [1 1 1]] / 13
  // (rounded), the border kept.
  std::vector<float> blurred(im.pixels.begin(), im.pixels.end());
  for (int64_t y = 1; y < H - 1; ++y)
    for (int64_t x = 1; x < W - 1; ++x)
      for (int64_t c = 0; c < C; ++c) {
        float acc = 0;
        for (int64_t dy = -1; dy <= 1; ++dy)
          for (int64_t dx = -1; dx <= 1; ++dx) acc += im.at(y + dy, x + dx)[c] * (dx == 0 && dy == 0 ? 5.0f : 1.0f);
        blurred[(y * W + x) * C + c] = std::nearbyint(std::clamp(acc / 13.0f, 0.0f, 255.0f));
      }
  blend_with(im, blurred, factor);
}

// ---- geometric ops ----

// Four f64 lanes: an RGB pixel and an unused fourth lane, so the three
// channels' arithmetic is one SIMD instruction (the same operations per lane
// as the scalar code, so the same results).
typedef double f64x4 __attribute__((vector_size(32)));

void affine_bicubic(Image& im, const std::array<double, 6>& a, const std::array<uint8_t, 3>& fill) {
  const int64_t H = im.height, W = im.width, C = im.channels;
  Image out(H, W, C);
  auto clip = [](int64_t v, int64_t n) { return std::clamp<int64_t>(v, 0, n - 1); };
  // PIL's cubic through four samples (a = -1 in Keys' family), on a channel or on an RGB pixel.
  auto cubic = [](auto v1, auto v2, auto v3, auto v4, double d) {
    const auto p1 = v2, p2 = -v1 + v3, p3 = 2 * (v1 - v2) + v3 - v4, p4 = -v1 + v2 - v3 + v4;
    return p1 + d * (p2 + d * (p3 + d * p4));
  };
  auto to_u8 = [](double v) { return v <= 0 ? uint8_t{0} : v >= 255 ? uint8_t{255} : static_cast<uint8_t>(v); };
  auto rgb = [&](int64_t yy, int64_t xx) {
    const uint8_t* p = im.at(yy, xx);
    return f64x4{static_cast<double>(p[0]), static_cast<double>(p[1]), static_cast<double>(p[2]), 0.0};
  };
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      double xin = a[0] * (x + 0.5) + a[1] * (y + 0.5) + a[2];
      double yin = a[3] * (x + 0.5) + a[4] * (y + 0.5) + a[5];
      uint8_t* dst = out.at(y, x);
      if (xin < 0 || xin >= W || yin < 0 || yin >= H) {
        for (int64_t c = 0; c < C; ++c) dst[c] = fill[C == 3 ? c : 0];
        continue;
      }
      xin -= 0.5, yin -= 0.5;
      const auto x0 = static_cast<int64_t>(std::floor(xin)), y0 = static_cast<int64_t>(std::floor(yin));
      const double dx = xin - x0, dy = yin - y0;
      const int64_t xs[4] = {clip(x0 - 1, W), clip(x0, W), clip(x0 + 1, W), clip(x0 + 2, W)};
      if (C == 3) {
        f64x4 rows[4];
        for (int r = 0; r < 4; ++r) {
          const int64_t yy = clip(y0 - 1 + r, H);
          rows[r] = cubic(rgb(yy, xs[0]), rgb(yy, xs[1]), rgb(yy, xs[2]), rgb(yy, xs[3]), dx);
        }
        const f64x4 v = cubic(rows[0], rows[1], rows[2], rows[3], dy);
        for (int c = 0; c < 3; ++c) dst[c] = to_u8(v[c]);
        continue;
      }
      for (int64_t c = 0; c < C; ++c) {
        double rows[4];
        for (int r = 0; r < 4; ++r) {
          const int64_t yy = clip(y0 - 1 + r, H);
          rows[r] = cubic(double(im.at(yy, xs[0])[c]), double(im.at(yy, xs[1])[c]), double(im.at(yy, xs[2])[c]),
                          double(im.at(yy, xs[3])[c]), dx);
        }
        dst[c] = to_u8(cubic(rows[0], rows[1], rows[2], rows[3], dy));
      }
    }
  im = std::move(out);
}

void rotate(Image& im, float degrees, const std::array<uint8_t, 3>& fill) {
  // PIL's Image.rotate without expand: the inverse rotation about the centre.
  const double angle = -static_cast<double>(degrees) * M_PI / 180.0;
  const double cx = im.width / 2.0, cy = im.height / 2.0;
  const double ca = std::cos(angle), sa = std::sin(angle);
  std::array<double, 6> m = {ca, sa, 0.0, -sa, ca, 0.0};
  m[2] = m[0] * -cx + m[1] * -cy + cx;
  m[5] = m[3] * -cx + m[4] * -cy + cy;
  affine_bicubic(im, m, fill);
}

void shear_x(Image& im, float factor, const std::array<uint8_t, 3>& fill) {
  affine_bicubic(im, {1, factor, 0, 0, 1, 0}, fill);
}
void shear_y(Image& im, float factor, const std::array<uint8_t, 3>& fill) {
  affine_bicubic(im, {1, 0, 0, factor, 1, 0}, fill);
}
void translate_x(Image& im, float pixels, const std::array<uint8_t, 3>& fill) {
  affine_bicubic(im, {1, 0, pixels, 0, 1, 0}, fill);
}
void translate_y(Image& im, float pixels, const std::array<uint8_t, 3>& fill) {
  affine_bicubic(im, {1, 0, 0, 0, 1, pixels}, fill);
}

// ---- the policy ----

void rand_augment(Image& im, const RandAugmentConfig& cfg, SampleRandom& rng) {
  for (int k = 0; k < cfg.num_ops; ++k) {
    const auto op = static_cast<AugmentOp>(rng.integer(0, kAugmentOps));  // with replacement
    if (cfg.prob < 1 && rng.uniform() > cfg.prob) continue;
    float m = cfg.magnitude;
    if (cfg.magnitude_std > 0) m += cfg.magnitude_std * rng.normal();
    const float level = std::clamp(m, 0.0f, cfg.magnitude_max) / 10.0f;  // timm's _LEVEL_DENOM
    auto signed_level = [&](float scale) { return rng.bernoulli(0.5f) ? -level * scale : level * scale; };
    switch (op) {
      case AugmentOp::auto_contrast: auto_contrast(im); break;
      case AugmentOp::equalize: equalize(im); break;
      case AugmentOp::invert: invert(im); break;
      case AugmentOp::rotate: rotate(im, signed_level(30.0f), cfg.fill); break;
      case AugmentOp::posterize: posterize(im, 4 - static_cast<int>(level * 4)); break;
      case AugmentOp::solarize: solarize(im, 256 - static_cast<int>(level * 256)); break;
      case AugmentOp::solarize_add: solarize_add(im, static_cast<int>(level * 110)); break;
      case AugmentOp::color: adjust_color(im, 1.0f + signed_level(0.9f)); break;
      case AugmentOp::contrast: adjust_contrast(im, 1.0f + signed_level(0.9f)); break;
      case AugmentOp::brightness: adjust_brightness(im, 1.0f + signed_level(0.9f)); break;
      case AugmentOp::sharpness: adjust_sharpness(im, 1.0f + signed_level(0.9f)); break;
      case AugmentOp::shear_x: shear_x(im, signed_level(0.3f), cfg.fill); break;
      case AugmentOp::shear_y: shear_y(im, signed_level(0.3f), cfg.fill); break;
      case AugmentOp::translate_x: translate_x(im, signed_level(cfg.translate_pct) * im.width, cfg.fill); break;
      case AugmentOp::translate_y: translate_y(im, signed_level(cfg.translate_pct) * im.height, cfg.fill); break;
    }
  }
}

}  // namespace cmha::data
