#include "data/mixup.h"

#include <algorithm>
#include <cmath>

#include "tensor/error.h"

namespace cmha::data {

MixDecision cutmix_box(float lambda, int64_t H, int64_t W, int64_t cy, int64_t cx) {
  // timm's rand_bbox: a box of side √(1 - λ) of the image, centred anywhere, clipped.
  const double ratio = std::sqrt(1.0 - lambda);
  const auto cut_h = static_cast<int64_t>(H * ratio), cut_w = static_cast<int64_t>(W * ratio);
  MixDecision m;
  m.cutmix = true;
  m.y0 = std::clamp<int64_t>(cy - cut_h / 2, 0, H), m.y1 = std::clamp<int64_t>(cy + cut_h / 2, 0, H);
  m.x0 = std::clamp<int64_t>(cx - cut_w / 2, 0, W), m.x1 = std::clamp<int64_t>(cx + cut_w / 2, 0, W);
  // The pasted area after clipping decides the label weight.
  m.lambda = 1.0f - static_cast<float>((m.y1 - m.y0) * (m.x1 - m.x0)) / static_cast<float>(H * W);
  return m;
}

MixDecision draw_mix(const MixupOptions& o, int64_t H, int64_t W, SampleRandom& rng) {
  MixDecision m;
  if (!o.enabled() || !(rng.uniform() < o.prob)) return m;
  bool use_cutmix = o.mixup_alpha <= 0;
  if (o.mixup_alpha > 0 && o.cutmix_alpha > 0) use_cutmix = rng.uniform() < o.switch_prob;
  const double alpha = use_cutmix ? o.cutmix_alpha : o.mixup_alpha;
  const auto lambda = static_cast<float>(rng.beta(alpha, alpha));
  if (!use_cutmix) {
    m.lambda = lambda;
    return m;
  }
  const int64_t cy = rng.integer(0, H), cx = rng.integer(0, W);
  return cutmix_box(lambda, H, W, cy, cx);
}

Tensor mixed_targets(const std::vector<int64_t>& labels, int64_t num_classes, float lambda, float smoothing) {
  const auto B = static_cast<int64_t>(labels.size());
  const float off = smoothing / static_cast<float>(num_classes), on = 1.0f - smoothing + off;
  Tensor t = Tensor::full({B, num_classes}, off * lambda + off * (1.0f - lambda));  // [B, classes]
  float* p = t.data<float>();
  for (int64_t b = 0; b < B; ++b) {
    CMHA_CHECK(labels[b] >= 0 && labels[b] < num_classes,
               "mixed_targets: label " + std::to_string(labels[b]) + " is outside [0, " + std::to_string(num_classes) +
                   ")");
    p[b * num_classes + labels[b]] += (on - off) * lambda;
    p[b * num_classes + labels[B - 1 - b]] += (on - off) * (1.0f - lambda);
  }
  return t;
}

}  // namespace cmha::data
