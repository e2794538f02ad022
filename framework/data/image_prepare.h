#pragma once
// The model's input from a loader batch (data/image_loader.h): the training
// step's first op, run on the batch's device by its image.prepare kernel
// (backend/image.h): u8 pixels → normalised, erased, mixed f32.
//
//   Tensor x = prepare_images(b.images.to(device), erase_on(b, device), b.prepare);  // [B, C, S, S] f32
#include <vector>

#include "backend/image.h"
#include "data/mixup.h"
#include "tensor/tensor.h"

namespace cmha::data {

// images [B, C, H, W] u8 → [B, C, H, W] f32 on the images' device; erase:
// [B, kEraseFields] i64 on the same device, or undefined (nothing erased).
Tensor prepare_images(const Tensor& images, const Tensor& erase, const backend::ImagePrepareParams& params);

// The normalisation of C channels: (x / 255 - mean[c]) / std[c], with
// 1.0f / std[c] as the multiplier. One mean and one std per channel, at most
// backend::kImageMaxChannels, each std positive and finite, else an error
// naming the counts or the value.
backend::ImagePrepareParams normalisation_params(const std::vector<float>& mean, const std::vector<float>& std,
                                                 int64_t channels);
// The batch's mixup/CutMix decision into `params` (lambda = 1 without CutMix: no mixing).
void set_mix(backend::ImagePrepareParams& params, const MixDecision& mix);

}  // namespace cmha::data
