#include "data/image_transforms.h"

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

// The taps of an antialiased 1-D resampling from `in` to `out` samples: the
// filter is stretched by the downscaling factor so that it averages every
// input sample it covers (PyTorch's _upsample_*_aa, PIL's ImagingResample).
struct Taps {
  std::vector<int64_t> first, count;
  std::vector<float> weights;  // [out, max_count]
  int64_t max_count = 0;
};

Taps make_taps(int64_t in, int64_t out, Interpolation interp) {
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double half_width = interp == Interpolation::bicubic ? 2.0 : 1.0;
  const double support = half_width * std::max(scale, 1.0);
  const double inv = scale >= 1 ? 1.0 / scale : 1.0;
  Taps t;
  t.max_count = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  t.first.resize(out), t.count.resize(out);
  t.weights.assign(static_cast<size_t>(out * t.max_count), 0.0f);
  for (int64_t i = 0; i < out; ++i) {
    const double center = scale * (i + 0.5);
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in);
    const int64_t n = std::min(hi - lo, t.max_count);
    std::vector<double> w(static_cast<size_t>(n));
    double total = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double x = (j + lo - center + 0.5) * inv;
      w[j] = interp == Interpolation::bicubic ? cubic(x) : triangle(x);
      total += w[j];
    }
    t.first[i] = lo, t.count[i] = n;
    for (int64_t j = 0; j < n; ++j) t.weights[i * t.max_count + j] = static_cast<float>(total != 0 ? w[j] / total : 0);
  }
  return t;
}

uint8_t round_u8(float v) { return static_cast<uint8_t>(std::nearbyint(std::clamp(v, 0.0f, 255.0f))); }

// Resamples the region `box` of `im` to out_h × out_w: rows first, then columns, in f32.
Image resample_region(const Image& im, const CropBox& box, int64_t out_h, int64_t out_w, Interpolation interp) {
  CMHA_CHECK(box.height > 0 && box.width > 0 && box.top >= 0 && box.left >= 0 && box.top + box.height <= im.height &&
                 box.left + box.width <= im.width && out_h > 0 && out_w > 0,
             "resize: region " + std::to_string(box.height) + "×" + std::to_string(box.width) + " at (" +
                 std::to_string(box.top) + ", " + std::to_string(box.left) + ") of a " + std::to_string(im.height) +
                 "×" + std::to_string(im.width) + " image to " + std::to_string(out_h) + "×" + std::to_string(out_w));
  const int64_t C = im.channels;
  const Taps tx = make_taps(box.width, out_w, interp), ty = make_taps(box.height, out_h, interp);
  // Horizontal pass: [box.height, out_w, C] in f32.
  std::vector<float> mid(static_cast<size_t>(box.height * out_w * C));
  for (int64_t y = 0; y < box.height; ++y) {
    const uint8_t* row = im.at(box.top + y, box.left);
    float* dst = mid.data() + y * out_w * C;
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
  // Vertical pass, rounded once.
  Image out(out_h, out_w, C);
  std::vector<float> acc(static_cast<size_t>(out_w * C));
  for (int64_t y = 0; y < out_h; ++y) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    const float* w = ty.weights.data() + y * ty.max_count;
    for (int64_t j = 0; j < ty.count[y]; ++j) {
      const float* src = mid.data() + (ty.first[y] + j) * out_w * C;
      for (int64_t k = 0; k < out_w * C; ++k) acc[k] += w[j] * src[k];
    }
    uint8_t* dst = out.at(y, 0);
    for (int64_t k = 0; k < out_w * C; ++k) dst[k] = round_u8(acc[k]);
  }
  return out;
}

}  // namespace

Image resize(const Image& im, int64_t height, int64_t width, Interpolation interp) {
  if (height == im.height && width == im.width) return im;
  return resample_region(im, {0, 0, im.height, im.width}, height, width, interp);
}

Image resize_shorter_side(const Image& im, int64_t size, Interpolation interp) {
  const int64_t shorter = std::min(im.height, im.width), longer = std::max(im.height, im.width);
  const int64_t new_longer = size * longer / shorter;  // truncated, as torchvision
  return im.width <= im.height ? resize(im, new_longer, size, interp) : resize(im, size, new_longer, interp);
}

Image crop(const Image& im, int64_t top, int64_t left, int64_t height, int64_t width) {
  CMHA_CHECK(top >= 0 && left >= 0 && height > 0 && width > 0 && top + height <= im.height &&
                 left + width <= im.width,
             "crop: " + std::to_string(height) + "×" + std::to_string(width) + " at (" + std::to_string(top) + ", " +
                 std::to_string(left) + ") does not fit a " + std::to_string(im.height) + "×" +
                 std::to_string(im.width) + " image");
  Image out(height, width, im.channels);
  for (int64_t y = 0; y < height; ++y)
    std::copy_n(im.at(top + y, left), width * im.channels, out.at(y, 0));
  return out;
}

Image center_crop(const Image& im, int64_t height, int64_t width) {
  // Python's round (half to even), as torchvision.
  const int64_t top = static_cast<int64_t>(std::nearbyint((im.height - height) / 2.0));
  const int64_t left = static_cast<int64_t>(std::nearbyint((im.width - width) / 2.0));
  return crop(im, top, left, height, width);
}

void hflip(Image& im) {
  const int64_t C = im.channels;
  for (int64_t y = 0; y < im.height; ++y)
    for (int64_t x = 0; x < im.width / 2; ++x)
      std::swap_ranges(im.at(y, x), im.at(y, x) + C, im.at(y, im.width - 1 - x));
}

CropBox random_resized_crop_box(int64_t height, int64_t width, float scale_lo, float scale_hi, float ratio_lo,
                                float ratio_hi, SampleRandom& rng) {
  const double area = static_cast<double>(height * width);
  const double log_lo = std::log(ratio_lo), log_hi = std::log(ratio_hi);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(scale_lo, scale_hi);
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * rng.uniform());
    const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(target * aspect)));
    const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(target / aspect)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int64_t top = rng.integer(0, height - h + 1), left = rng.integer(0, width - w + 1);
      return {top, left, h, w};
    }
  }
  // Fallback: the whole image, cut to the nearest allowed aspect ratio.
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < ratio_lo)
    h = static_cast<int64_t>(std::nearbyint(w / static_cast<double>(ratio_lo)));
  else if (in_ratio > ratio_hi)
    w = static_cast<int64_t>(std::nearbyint(h * static_cast<double>(ratio_hi)));
  return {(height - h) / 2, (width - w) / 2, h, w};
}

void to_normalised_chw(const Image& im, const std::vector<float>& mean, const std::vector<float>& std, float* out) {
  const int64_t C = im.channels, HW = im.height * im.width;
  CMHA_CHECK(static_cast<int64_t>(mean.size()) == C && static_cast<int64_t>(std.size()) == C,
             "normalise: " + std::to_string(mean.size()) + " means and " + std::to_string(std.size()) +
                 " stds for an image of " + std::to_string(C) + " channels");
  for (int64_t c = 0; c < C; ++c) {
    const float m = mean[c], inv = 1.0f / std[c];
    float* dst = out + c * HW;
    const uint8_t* src = im.pixels.data() + c;
    for (int64_t i = 0; i < HW; ++i) dst[i] = (static_cast<float>(src[i * C]) / 255.0f - m) * inv;
  }
}

void random_erase(float* chw, int64_t C, int64_t H, int64_t W, float prob, SampleRandom& rng) {
  if (prob <= 0 || !rng.bernoulli(prob)) return;
  const double area = static_cast<double>(H * W);
  const double log_lo = std::log(0.3), log_hi = std::log(1 / 0.3);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(0.02f, 1.0f / 3);
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * rng.uniform());
    const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(target * aspect)));
    const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(target / aspect)));
    if (w < W && h < H) {
      const int64_t top = rng.integer(0, H - h + 1), left = rng.integer(0, W - w + 1);
      for (int64_t c = 0; c < C; ++c)
        for (int64_t y = top; y < top + h; ++y)
          for (int64_t x = left; x < left + w; ++x) chw[(c * H + y) * W + x] = rng.normal();
      return;
    }
  }
}

void transform_sample(const Image& im, const ImageTransformOptions& o, bool training, SampleRandom& rng, float* out) {
  const int64_t S = o.image_size;
  Image x;
  if (training && !o.random_resized_crop) {
    x = center_crop(resize_shorter_side(im, S, o.interpolation), S, S);
  } else if (training) {
    const CropBox box = random_resized_crop_box(im.height, im.width, o.crop_scale_lo, o.crop_scale_hi,
                                                o.crop_ratio_lo, o.crop_ratio_hi, rng);
    x = box.height == S && box.width == S ? crop(im, box.top, box.left, S, S)
                                          : resample_region(im, box, S, S, o.interpolation);
  } else {
    x = center_crop(resize_shorter_side(im, o.eval_resize, o.interpolation), S, S);
  }
  if (training) {
    if (o.hflip && rng.bernoulli(0.5f)) hflip(x);
    if (o.rand_augment) rand_augment(x, o.rand_augment_config, rng);
  }
  to_normalised_chw(x, o.mean, o.std, out);
  if (training) random_erase(out, x.channels, S, S, o.random_erasing, rng);
}

}  // namespace cmha::data
