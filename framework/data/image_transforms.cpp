#include "data/image_transforms.h"

#include <algorithm>
#include <cmath>

#include "tensor/error.h"

namespace cmha::data {

namespace {

// A centre crop's offset: Python's round (half to even) of the margin's half, as torchvision.
int64_t centre_offset(int64_t outer, int64_t inner) { return static_cast<int64_t>(std::nearbyint((outer - inner) / 2.0)); }

// torchvision's Resize(size) sides: the shorter becomes `size`, the longer keeps the aspect (truncated).
ImageSize shorter_side_size(int64_t height, int64_t width, int64_t size) {
  const int64_t new_longer = size * std::max(height, width) / std::min(height, width);
  return width <= height ? ImageSize{new_longer, size} : ImageSize{size, new_longer};
}

// RandomResizedCrop: `box` of the source to S × S, decoded at the smallest
// DCT scale n/8 at which the box still has S × S pixels, only its rows and
// columns. The box maps to the fractional interval box·n/8 of the scaled
// image; at n = 8 this is exactly the crop-then-resize of the whole image.
Image resized_crop(ImageSource& src, const CropBox& box, int64_t S, Interpolation interp) {
  const int n = src.scale_for(static_cast<double>(box.height), static_cast<double>(box.width), S, S);
  const double f = n / 8.0;
  const double top = box.top * f, left = box.left * f, h = box.height * f, w = box.width * f;
  // The scaled pixels the box touches: the taps stay inside them, as they stay inside the crop at full scale.
  const auto y0 = static_cast<int64_t>(std::floor(top)), x0 = static_cast<int64_t>(std::floor(left));
  const int64_t y1 = std::min(static_cast<int64_t>(std::ceil(top + h)), src.scaled_height(n));
  const int64_t x1 = std::min(static_cast<int64_t>(std::ceil(left + w)), src.scaled_width(n));
  Taps ty = make_taps(y1 - y0, top - y0, h, S, 0, S, interp), tx = make_taps(x1 - x0, left - x0, w, S, 0, S, interp);
  const DecodedRegion& r = src.decode(n, y0, y1, x0, x1);
  ty.shift(y0 - r.top), tx.shift(x0 - r.left);
  return resample(r.image, ty, tx);
}

// Resize the shorter side to R, then the centre S × S: only the outputs of
// the crop are computed, from the rows and columns their taps read, of the
// image decoded at the smallest scale whose size still reaches R.
Image resize_centre_crop(ImageSource& src, int64_t R, int64_t S, Interpolation interp) {
  const int64_t H = src.height(), W = src.width();
  const ImageSize out = shorter_side_size(H, W, R);
  CMHA_CHECK(out.height >= S && out.width >= S,
             "centre crop: " + std::to_string(S) + "×" + std::to_string(S) + " does not fit a " +
                 std::to_string(out.height) + "×" + std::to_string(out.width) + " image");
  const int64_t top = centre_offset(out.height, S), left = centre_offset(out.width, S);
  if (out.height == H && out.width == W) {  // no resampling: a plain crop
    const DecodedRegion& r = src.decode(8, top, top + S, left, left + S);
    return crop(r.image, top - r.top, left - r.left, S, S);
  }
  const int n = src.scale_for(static_cast<double>(H), static_cast<double>(W), out.height, out.width);
  const double f = n / 8.0;
  Taps ty = make_taps(src.scaled_height(n), 0.0, H * f, out.height, top, S, interp);
  Taps tx = make_taps(src.scaled_width(n), 0.0, W * f, out.width, left, S, interp);
  const int64_t y0 = ty.lowest(), x0 = tx.lowest();
  const DecodedRegion& r = src.decode(n, y0, ty.highest(), x0, tx.highest());
  ty.shift(-r.top), tx.shift(-r.left);
  return resample(r.image, ty, tx);
}

}  // namespace

Image resize(const Image& im, int64_t height, int64_t width, Interpolation interp) {
  if (height == im.height && width == im.width) return im;
  return resample(im, make_taps(im.height, height, interp), make_taps(im.width, width, interp));
}

Image resize_shorter_side(const Image& im, int64_t size, Interpolation interp) {
  const ImageSize s = shorter_side_size(im.height, im.width, size);
  return resize(im, s.height, s.width, interp);
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
  return crop(im, centre_offset(im.height, height), centre_offset(im.width, width), height, width);
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

void to_chw(const Image& im, uint8_t* out) {
  const int64_t C = im.channels, HW = im.height * im.width;
  for (int64_t c = 0; c < C; ++c) {
    uint8_t* dst = out + c * HW;
    const uint8_t* src = im.pixels.data() + c;
    for (int64_t i = 0; i < HW; ++i) dst[i] = src[i * C];
  }
}

EraseDraw draw_random_erase(int64_t H, int64_t W, float prob, SampleRandom& rng) {
  if (prob <= 0 || !rng.bernoulli(prob)) return {};
  const double area = static_cast<double>(H * W);
  const double log_lo = std::log(0.3), log_hi = std::log(1 / 0.3);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(0.02f, 1.0f / 3);
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * rng.uniform());
    const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(target * aspect)));
    const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(target / aspect)));
    if (w < W && h < H) {
      const int64_t top = rng.integer(0, H - h + 1), left = rng.integer(0, W - w + 1);
      // The values are the stream's next draws (h = 0 or w = 0: an empty box, none).
      return h > 0 && w > 0 ? EraseDraw{top, left, h, w, rng.position()} : EraseDraw{};
    }
  }
  return {};
}

EraseDraw transform_sample(ImageSource& src, const ImageTransformOptions& o, bool training, SampleRandom& rng,
                           uint8_t* out) {
  const int64_t S = o.image_size;
  Image x;
  if (training && o.random_resized_crop) {
    // The box is drawn from the header's size, before anything is decoded.
    const CropBox box = random_resized_crop_box(src.height(), src.width(), o.crop_scale_lo, o.crop_scale_hi,
                                                o.crop_ratio_lo, o.crop_ratio_hi, rng);
    x = resized_crop(src, box, S, o.interpolation);
  } else {
    x = resize_centre_crop(src, training ? S : o.eval_resize, S, o.interpolation);
  }
  if (training) {
    if (o.hflip && rng.bernoulli(0.5f)) hflip(x);
    if (o.rand_augment) rand_augment(x, o.rand_augment_config, rng);
  }
  to_chw(x, out);
  return training ? draw_random_erase(S, S, o.random_erasing, rng) : EraseDraw{};
}

EraseDraw transform_sample(const Image& im, const ImageTransformOptions& o, bool training, SampleRandom& rng,
                           uint8_t* out) {
  ImageSource src(im);
  return transform_sample(src, o, training, rng, out);
}

}  // namespace cmha::data
