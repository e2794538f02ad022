// CPU kernel: image.prepare (backend/image.h). Each pair of samples (b,
// B-1-b) is one task: both are normalised and erased into `out`, then mixed
// with each other in place, as the loader's f32 path did per sample and per
// batch before the step took it over.
#include <algorithm>
#include <cstdint>
#include <string>

#include "backend/cpu/kernel_table.h"
#include "backend/image.h"
#include "tensor/error.h"

namespace cmha::cpu {

namespace {

// Sample [C, H, W]: normalised, then its erase box overwritten.
void normalise_and_erase(const uint8_t* in, const int64_t* erase_row, float* out, int64_t C, int64_t H, int64_t W,
                         const backend::ImagePrepareParams& p) {
  const int64_t HW = H * W;
  for (int64_t c = 0; c < C; ++c) {
    const uint8_t* src = in + c * HW;
    float* dst = out + c * HW;
    for (int64_t i = 0; i < HW; ++i) dst[i] = backend::image_normalised(src[i], p, c);
  }
  if (!erase_row || erase_row[backend::kEraseHeight] <= 0) return;
  const int64_t top = erase_row[backend::kEraseTop], left = erase_row[backend::kEraseLeft];
  const int64_t h = erase_row[backend::kEraseHeight], w = erase_row[backend::kEraseWidth];
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = top; y < top + h; ++y)
      for (int64_t x = left; x < left + w; ++x) out[(c * H + y) * W + x] = backend::image_erase_value(erase_row, p, c, y, x);
}

// Samples a and b ([C, H, W], already prepared) mixed with each other in place.
void mix_pair(float* a, float* b, int64_t C, int64_t H, int64_t W, const backend::ImagePrepareParams& p) {
  if (p.mix == backend::ImageMix::cutmix) {
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = p.y0; y < p.y1; ++y)
        std::swap_ranges(a + (c * H + y) * W + p.x0, a + (c * H + y) * W + p.x1, b + (c * H + y) * W + p.x0);
    return;
  }
  const int64_t n = C * H * W;
  for (int64_t i = 0; i < n; ++i) {
    const float u = a[i], v = b[i];
    a[i] = backend::image_mixed(u, v, p, 0, 0);
    b[i] = backend::image_mixed(v, u, p, 0, 0);
  }
}

void prepare(const Tensor& images, const Tensor& erase, const Tensor& out, const backend::ImagePrepareParams& p) {
  CMHA_CHECK(images.dtype() == DType::u8 && images.dim() == 4 && images.is_contiguous(),
             "image.prepare: images must be contiguous u8 [B, C, H, W], got " + images.describe());
  const int64_t B = images.size(0), C = images.size(1), H = images.size(2), W = images.size(3);
  CMHA_CHECK(out.dtype() == DType::f32 && out.shape() == images.shape() && out.is_contiguous(),
             "image.prepare: out " + out.describe() + " must be contiguous f32 of the images' shape " +
                 images.describe());
  CMHA_CHECK(C == p.channels && C >= 1 && C <= backend::kImageMaxChannels,
             "image.prepare: " + std::to_string(C) + " channels, parameters for " + std::to_string(p.channels));
  CMHA_CHECK(!erase.defined() || (erase.dtype() == DType::i64 && erase.is_contiguous() &&
                                  erase.shape() == Shape{B, backend::kEraseFields}),
             "image.prepare: erase must be contiguous i64 [" + std::to_string(B) + ", " +
                 std::to_string(backend::kEraseFields) + "], got " + erase.describe());
  const uint8_t* in = images.data<uint8_t>();
  const int64_t* rows = erase.defined() ? erase.data<int64_t>() : nullptr;
  float* dst = out.data<float>();
  const int64_t per = C * H * W, pairs = (B + 1) / 2;
  const bool mixing = p.mix != backend::ImageMix::none;
#pragma omp parallel for schedule(static) if (B * per >= 2 * 32768)
  for (int64_t k = 0; k < pairs; ++k) {
    const int64_t q = B - 1 - k;
    normalise_and_erase(in + k * per, rows ? rows + k * backend::kEraseFields : nullptr, dst + k * per, C, H, W, p);
    if (q == k) continue;  // an odd batch's middle sample pairs with itself: never mixed
    normalise_and_erase(in + q * per, rows ? rows + q * backend::kEraseFields : nullptr, dst + q * per, C, H, W, p);
    if (mixing) mix_pair(dst + k * per, dst + q * per, C, H, W, p);
  }
}

}  // namespace

backend::ImageKernels image_kernels() { return {.prepare = prepare}; }

}  // namespace cmha::cpu
