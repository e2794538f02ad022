#pragma once
// RandAugment (Cubuk et al. 2020) as timm implements it for DeiT
// ("rand-m9-mstd0.5-inc1"): per image, `num_ops` operations drawn with
// replacement from the 15 ops below, each applied with probability `prob`
// at a magnitude drawn from N(magnitude, magnitude_std) clipped to
// [0, magnitude_max]. The "increasing" variants make every op stronger as
// the magnitude grows (posterize keeps fewer bits, solarize has a lower
// threshold, enhancements move further from 1 in a random direction).
// Geometric ops resample bicubically and fill with `fill` (the dataset mean).
#include <array>
#include <cstdint>
#include <string>

#include "data/image.h"
#include "data/sample_random.h"

namespace cmha::data {

struct RandAugmentConfig {
  int num_ops = 2;            // "n"
  float magnitude = 9;        // "m"
  float magnitude_std = 0.5;  // "mstd"; 0 = fixed magnitude
  float magnitude_max = 10;   // "mmax"
  bool increasing = true;     // "inc"
  float prob = 0.5;           // each chosen op is applied with this probability
  float translate_pct = 0.45f;          // TranslateXRel/YRel at magnitude 10: this fraction of the side
  std::array<uint8_t, 3> fill = {124, 116, 104};  // ImageNet mean × 255
};

// Parses timm's spec "rand-m9-mstd0.5-inc1" (sections m, n, mstd, mmax, inc,
// p; any order after "rand"). A malformed spec is an error naming it.
RandAugmentConfig parse_rand_augment(const std::string& spec);

// The ops, one per name, in timm's order of the increasing set.
enum class AugmentOp {
  auto_contrast, equalize, invert, rotate, posterize, solarize, solarize_add, color, contrast, brightness,
  sharpness, shear_x, shear_y, translate_x, translate_y
};
constexpr int kAugmentOps = 15;

// Applies RandAugment to `image` (1 or 3 channels) in place.
void rand_augment(Image& image, const RandAugmentConfig& config, SampleRandom& rng);

// ---- the individual ops at an explicit argument (tested against torchvision) ----
// Pixel ops follow torchvision.transforms.functional on uint8 tensors
// (blends clamp then truncate; grey = 0.2989 R + 0.587 G + 0.114 B truncated).
void auto_contrast(Image& im);
void equalize(Image& im);
void invert(Image& im);
void posterize(Image& im, int bits);               // keep `bits` most significant bits (0..8)
void solarize(Image& im, int threshold);           // invert pixels >= threshold
void solarize_add(Image& im, int add, int threshold = 128);  // pixels < threshold += add (saturating)
void adjust_color(Image& im, float factor);        // saturation: blend with grey
void adjust_contrast(Image& im, float factor);     // blend with the mean grey
void adjust_brightness(Image& im, float factor);   // blend with black
void adjust_sharpness(Image& im, float factor);    // blend with the 3×3 smoothed image
// Affine resampling as PIL's Image.transform(AFFINE, bicubic): output pixel
// (x, y) samples the input at (a x + b y + c, d x + e y + f) in pixel-centre
// coordinates; samples outside the image take `fill`.
void affine_bicubic(Image& im, const std::array<double, 6>& inverse_matrix, const std::array<uint8_t, 3>& fill);
void rotate(Image& im, float degrees, const std::array<uint8_t, 3>& fill);  // counter-clockwise about the centre
void shear_x(Image& im, float factor, const std::array<uint8_t, 3>& fill);
void shear_y(Image& im, float factor, const std::array<uint8_t, 3>& fill);
void translate_x(Image& im, float pixels, const std::array<uint8_t, 3>& fill);
void translate_y(Image& im, float pixels, const std::array<uint8_t, 3>& fill);

}  // namespace cmha::data
