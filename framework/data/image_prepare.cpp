#include "data/image_prepare.h"

#include <cmath>
#include <string>

#include "backend/kernels.h"
#include "tensor/error.h"

namespace cmha::data {

Tensor prepare_images(const Tensor& images, const Tensor& erase, const backend::ImagePrepareParams& params) {
  CMHA_CHECK(images.dtype() == DType::u8 && images.dim() == 4,
             "prepare_images: expects u8 images [B, C, H, W], got " + images.describe());
  CMHA_CHECK(!erase.defined() || erase.device() == images.device(),
             "prepare_images: erase rows " + erase.describe() + " are not on the images' device " +
                 images.device().str());
  const Tensor x = images.contiguous();
  Tensor out = Tensor::empty(x.shape(), DType::f32, x.device());  // [B, C, H, W] f32
  CMHA_KERNEL(x.device(), image.prepare)(x, erase.defined() ? erase.contiguous() : erase, out, params);
  return out;
}

backend::ImagePrepareParams normalisation_params(const std::vector<float>& mean, const std::vector<float>& std,
                                                 int64_t C) {
  CMHA_CHECK(static_cast<int64_t>(mean.size()) == C && static_cast<int64_t>(std.size()) == C,
             "normalise: " + std::to_string(mean.size()) + " means and " + std::to_string(std.size()) +
                 " stds for an image of " + std::to_string(C) + " channels");
  CMHA_CHECK(C >= 1 && C <= backend::kImageMaxChannels,
             "normalise: images of " + std::to_string(C) + " channels (at most " +
                 std::to_string(backend::kImageMaxChannels) + ")");
  backend::ImagePrepareParams p;
  p.channels = C;
  for (int64_t c = 0; c < C; ++c) {
    CMHA_CHECK(std::isfinite(mean[c]) && std::isfinite(std[c]) && std[c] > 0,
               "normalise: channel " + std::to_string(c) + " has mean " + std::to_string(mean[c]) + " and std " +
                   std::to_string(std[c]) + " (a finite mean and a positive, finite std)");
    p.mean[c] = mean[c];
    p.inv_std[c] = 1.0f / std[c];
  }
  return p;
}

void set_mix(backend::ImagePrepareParams& p, const MixDecision& mix) {
  // As the loader's f32 mixing did: λ = 1 without CutMix leaves the batch as it is.
  if (!mix.cutmix && mix.lambda >= 1.0f) {
    p.mix = backend::ImageMix::none;
    return;
  }
  p.mix = mix.cutmix ? backend::ImageMix::cutmix : backend::ImageMix::mixup;
  p.lambda = mix.lambda;
  p.y0 = mix.y0, p.y1 = mix.y1, p.x0 = mix.x0, p.x1 = mix.x1;
}

}  // namespace cmha::data
