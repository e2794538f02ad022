#pragma once
// Per-sample image transforms of DeiT (Touvron et al. 2021), as torchvision
// and timm define them, and the composed train and eval pipelines.
//   train: RandomResizedCrop (bicubic) → horizontal flip → RandAugment →
//          to u8 CHW; random erasing's box drawn
//   eval:  resize the shorter side (bicubic) → centre crop → to u8 CHW
// Normalisation, the erasing's per-pixel normal values and mixup/CutMix are
// the training step's first op on its device (backend/image.h, data/image_prepare.h),
// from the draws made here on the sample's stream.
// Resampling is antialiased and separable (data/image_resample.h). A JPEG is
// decoded only where the crop reads it, at the smallest DCT scale that still
// covers the output (data/image_source.h): the crop box is drawn from the
// header's size exactly as from the decoded image's.
#include <cstdint>
#include <vector>

#include "data/image.h"
#include "data/image_resample.h"
#include "data/image_source.h"
#include "data/rand_augment.h"
#include "data/sample_random.h"

namespace cmha::data {

Image resize(const Image& im, int64_t height, int64_t width, Interpolation interp = Interpolation::bicubic);
// torchvision Resize(size): the shorter side becomes `size`, the other keeps the aspect (truncated).
Image resize_shorter_side(const Image& im, int64_t size, Interpolation interp = Interpolation::bicubic);
Image crop(const Image& im, int64_t top, int64_t left, int64_t height, int64_t width);
// torchvision center_crop (the image must be at least height × width).
Image center_crop(const Image& im, int64_t height, int64_t width);
void hflip(Image& im);

struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
};
// torchvision RandomResizedCrop.get_params: 10 tries at an area fraction in
// [scale_lo, scale_hi] and a log-uniform aspect in [ratio_lo, ratio_hi], then
// the centre crop clamped to the ratio range.
CropBox random_resized_crop_box(int64_t height, int64_t width, float scale_lo, float scale_hi, float ratio_lo,
                                float ratio_hi, SampleRandom& rng);

// uint8 HWC → uint8 CHW written to `out` ([C, H, W]).
void to_chw(const Image& im, uint8_t* out);

// One sample's random erasing as drawn: rows [top, top + height), columns
// [left, left + width); height = 0: not erased. The box's standard normal
// values (per pixel and channel) are the sample stream's draws from word
// first_word on (backend/image.h): the device draws them, the host only skips them.
struct EraseDraw {
  int64_t top = 0, left = 0, height = 0, width = 0;
  uint64_t first_word = 0;
};
// timm RandomErasing (mode 'pixel', one box): with probability `prob`, up
// to 10 tries at an area fraction in [0.02, 1/3] and a log-uniform aspect in
// [0.3, 1/0.3]; the first box that fits is erased.
EraseDraw draw_random_erase(int64_t H, int64_t W, float prob, SampleRandom& rng);

struct ImageTransformOptions {
  int64_t image_size = 224;                 // output side
  bool random_resized_crop = true;          // training; false = shorter side to image_size, centre crop
  float crop_scale_lo = 0.08f, crop_scale_hi = 1.0f;
  float crop_ratio_lo = 3.0f / 4, crop_ratio_hi = 4.0f / 3;
  bool hflip = true;                        // with probability 0.5
  bool rand_augment = false;
  RandAugmentConfig rand_augment_config;
  float random_erasing = 0;                 // probability
  int64_t eval_resize = 256;                // eval: shorter side before the centre crop
  std::vector<float> mean = {0.485f, 0.456f, 0.406f};
  std::vector<float> std = {0.229f, 0.224f, 0.225f};
  Interpolation interpolation = Interpolation::bicubic;
};

// One sample through the train (training = true) or eval pipeline, into
// `out` [C, image_size, image_size] u8, C = the image's channels; returns
// its random erasing (none in evaluation).
EraseDraw transform_sample(ImageSource& src, const ImageTransformOptions& options, bool training, SampleRandom& rng,
                           uint8_t* out);
EraseDraw transform_sample(const Image& im, const ImageTransformOptions& options, bool training, SampleRandom& rng,
                           uint8_t* out);

}  // namespace cmha::data
