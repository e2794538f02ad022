#pragma once
// Batch-level mixup (Zhang et al. 2018) and CutMix (Yun et al. 2019) as
// timm's Mixup(mode="batch") does them for DeiT: per batch, with probability
// `prob`, either CutMix (with probability switch_prob when both are on) or
// mixup; the batch is mixed with itself reversed (sample b with B-1-b), and
// the soft targets are label-smoothed one-hots mixed with the same lambda.
// CutMix's lambda is corrected to the pasted box's area after clipping.
#include <cstdint>
#include <vector>

#include "data/sample_random.h"
#include "tensor/tensor.h"

namespace cmha::data {

struct MixupOptions {
  float mixup_alpha = 0;    // Beta(α, α) for mixup; 0 = off
  float cutmix_alpha = 0;   // Beta(α, α) for CutMix; 0 = off
  float prob = 1.0f;        // probability that a batch is mixed at all
  float switch_prob = 0.5f; // probability of CutMix when both are on
  float label_smoothing = 0.1f;
  bool enabled() const { return mixup_alpha > 0 || cutmix_alpha > 0; }
};

struct MixDecision {
  bool cutmix = false;
  float lambda = 1;                  // weight of the sample itself (box-corrected for CutMix)
  int64_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;  // CutMix box rows [y0, y1), columns [x0, x1)
};

// The batch's draw (lambda = 1: no mixing).
MixDecision draw_mix(const MixupOptions& options, int64_t height, int64_t width, SampleRandom& rng);
// timm's rand_bbox with the lambda correction, for a given lambda and centre.
MixDecision cutmix_box(float lambda, int64_t height, int64_t width, int64_t cy, int64_t cx);

// The pixels are mixed on the training device (backend/image.h's image.prepare,
// data/image_prepare.h); the loader draws the decision and the soft targets here.
// Soft targets [B, num_classes]: lambda · smooth(y_b) + (1 - lambda) · smooth(y_{B-1-b}),
// smooth(y) = one-hot · (1 - s) + s / num_classes.
Tensor mixed_targets(const std::vector<int64_t>& labels, int64_t num_classes, float lambda, float smoothing);

}  // namespace cmha::data
