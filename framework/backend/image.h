#pragma once
// Kernel-table entries: image batches (see backend/kernels.h). The loader
// (data/image_loader.h) delivers the resampled, augmented pixels as u8 and
// draws every random number of the pixel-wise augmentations on the host; the
// training step's first op turns them into the model's f32 input on the
// training device, in one pass:
//   normalise: (x / 255 - mean[c]) · inv_std[c]                     (every sample)
//   erase:     a box of each sample replaced by standard normal values (timm's
//              RandomErasing, mode 'pixel', as the loader drew the box)
//   mix:       sample b with sample B-1-b, mixup or CutMix (timm's Mixup,
//              mode 'batch', as the loader drew lambda and the box)
// The per-element arithmetic below is written once (CMHA_HOST_DEVICE) and run
// by the CPU and the CUDA kernels: the CPU's result is, bit for bit, the one
// the loader's f32 path computed before the move (tests/unit/image_prepare_test.cpp).
#include <cmath>
#include <cstdint>

#include "tensor/philox.h"
#include "tensor/tensor.h"

namespace cmha::backend {

inline constexpr int64_t kImageMaxChannels = 4;

// The columns of the erase tensor, one i64 row per sample ([B, kEraseFields]):
// rows [top, top + height) and columns [left, left + width) of every channel
// hold normal values drawn from the sample's Philox stream `stream`
// (data/sample_random.h) from word `first_word` on, two words per value, in
// (channel, row, column) order: what SampleRandom::normal() drew there on the
// host. height = 0: the sample is not erased.
enum ImageEraseField : int { kEraseTop, kEraseLeft, kEraseHeight, kEraseWidth, kEraseStream, kEraseFirstWord, kEraseFields };

enum class ImageMix : int32_t { none, mixup, cutmix };

// The batch's parameters (a few dozen bytes, passed by value to a GPU kernel).
struct ImagePrepareParams {
  int64_t channels = 0;                  // C, at most kImageMaxChannels
  float mean[kImageMaxChannels] = {};    // per channel
  float inv_std[kImageMaxChannels] = {}; // 1.0f / std[c], as f32
  uint32_t key[2] = {0, 0};              // the samples' streams' key (erasing)
  uint32_t domain = 0;                   // and their domain
  ImageMix mix = ImageMix::none;
  float lambda = 1;                      // mixup: the sample's own weight
  int64_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;  // CutMix: rows [y0, y1), columns [x0, x1) come from the partner
};

// Pixel value v of channel c, normalised.
CMHA_HOST_DEVICE float image_normalised(uint8_t v, const ImagePrepareParams& p, int64_t c) {
  return (static_cast<float>(v) / 255.0f - p.mean[c]) * p.inv_std[c];
}

// Whether (y, x) lies in the sample's erase box (row: its erase row, or null).
CMHA_HOST_DEVICE bool image_erased(const int64_t* row, int64_t y, int64_t x) {
  return row && row[kEraseHeight] > 0 && y >= row[kEraseTop] && y < row[kEraseTop] + row[kEraseHeight] &&
         x >= row[kEraseLeft] && x < row[kEraseLeft] + row[kEraseWidth];
}

// The normal value of (c, y, x) inside the erase box.
CMHA_HOST_DEVICE float image_erase_value(const int64_t* row, const ImagePrepareParams& p, int64_t c, int64_t y,
                                         int64_t x) {
  const int64_t h = row[kEraseHeight], w = row[kEraseWidth];
  const auto j = static_cast<uint64_t>((c * h + (y - row[kEraseTop])) * w + (x - row[kEraseLeft]));
  const uint64_t word = static_cast<uint64_t>(row[kEraseFirstWord]) + 2 * j;
  const auto stream = static_cast<uint64_t>(row[kEraseStream]);
  return philox_box_muller(philox_stream_word(word, p.domain, stream, p.key[0], p.key[1]),
                           philox_stream_word(word + 1, p.domain, stream, p.key[0], p.key[1]));
}

// The mixed value of a sample whose own value is `self` and whose partner's
// (sample B-1-b, not the sample itself) is `partner` at (y, x). Mixup is
// fma(self, λ, partner · (1 - λ)): the contraction g++ -march=native made of
// the loader's former `a * l + z * r`, pinned here so every device rounds alike.
CMHA_HOST_DEVICE float image_mixed(float self, float partner, const ImagePrepareParams& p, int64_t y, int64_t x) {
  if (p.mix == ImageMix::cutmix) return y >= p.y0 && y < p.y1 && x >= p.x0 && x < p.x1 ? partner : self;
  return ::fmaf(self, p.lambda, partner * (1.0f - p.lambda));
}

struct ImageKernels {
  // out [B, C, H, W] f32 = mix(erase(normalise(images))) as above. images:
  // [B, C, H, W] u8, contiguous; erase: [B, kEraseFields] i64, contiguous, or
  // undefined (no sample erased); out: contiguous, preallocated, on the
  // device of images and erase. C == params.channels. With a mix, sample b
  // pairs with B-1-b; an odd batch's middle sample is only normalised and erased.
  void (*prepare)(const Tensor& images, const Tensor& erase, const Tensor& out, const ImagePrepareParams& params) =
      nullptr;
};

}  // namespace cmha::backend
