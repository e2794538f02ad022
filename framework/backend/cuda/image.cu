// CUDA kernel: image.prepare (backend/image.h). One thread per output
// element: it normalises (or, inside the erase box, draws) its own sample's
// value and, when the batch is mixed, its partner's (sample B-1-b), then mixes
// them with the arithmetic the CPU kernel runs (backend/image.h's shared
// functions). The u8 batch is read twice when mixed (a quarter of the f32
// output's bytes each time), the output written once.
//
// The normalisation and the mix are IEEE operations in a pinned order (a
// division, a subtraction, a multiply; one fmaf of a rounded product), so they
// give the CPU's bits; an erased value goes through double log, cos and sqrt,
// which CUDA's libdevice rounds within an ulp or two of glibc: after the
// conversion to f32 the two agree except where the double lands within that
// of a float rounding boundary (the parity test allows that, nothing more).
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernel_table.h"
#include "backend/image.h"

namespace cmha::cuda {
namespace {

using backend::ImagePrepareParams;

// Sample b's value at (c, y, x), normalised or erased.
__device__ __forceinline__ float prepared_value(const uint8_t* images, const int64_t* erase, int64_t b, int64_t c,
                                                int64_t y, int64_t x, int64_t C, int64_t H, int64_t W,
                                                const ImagePrepareParams& p) {
  const int64_t* row = erase ? erase + b * backend::kEraseFields : nullptr;
  if (backend::image_erased(row, y, x)) return backend::image_erase_value(row, p, c, y, x);
  return backend::image_normalised(images[((b * C + c) * H + y) * W + x], p, c);
}

__global__ void prepare_kernel(const uint8_t* images, const int64_t* erase, float* out, int64_t B, int64_t C,
                               int64_t H, int64_t W, ImagePrepareParams p) {
  const int64_t n = B * C * H * W;
  CMHA_GRID_STRIDE(i, n) {
    // i = ((b·C + c)·H + y)·W + x
    const int64_t x = i % W, y = i / W % H, c = i / (W * H) % C, b = i / (W * H * C);
    const float self = prepared_value(images, erase, b, c, y, x, C, H, W, p);
    const int64_t partner = B - 1 - b;
    if (p.mix == backend::ImageMix::none || partner == b) {
      out[i] = self;
      continue;
    }
    out[i] = backend::image_mixed(self, prepared_value(images, erase, partner, c, y, x, C, H, W, p), p, y, x);
  }
}

void prepare(const Tensor& images, const Tensor& erase, const Tensor& out, const ImagePrepareParams& p) {
  CMHA_CHECK(images.dim() == 4, "image.prepare: images must be [B, C, H, W], got " + images.describe());
  const int64_t B = images.size(0), C = images.size(1), H = images.size(2), W = images.size(3);
  const uint8_t* pi = device_data<uint8_t>(images, "image.prepare");
  float* po = device_data<float>(out, "image.prepare");
  CMHA_CHECK(out.shape() == images.shape(),
             "image.prepare: out " + out.describe() + " must have the images' shape " + images.describe());
  CMHA_CHECK(C == p.channels && C >= 1 && C <= backend::kImageMaxChannels,
             "image.prepare: " + std::to_string(C) + " channels, parameters for " + std::to_string(p.channels));
  const int64_t* pe = nullptr;
  if (erase.defined()) {
    CMHA_CHECK((erase.shape() == Shape{B, backend::kEraseFields}),
               "image.prepare: erase must be i64 [" + std::to_string(B) + ", " + std::to_string(backend::kEraseFields) +
                   "], got " + erase.describe());
    pe = device_data<int64_t>(erase, "image.prepare");
  }
  const int64_t n = images.numel();
  if (n == 0) return;
  prepare_kernel<<<blocks_for(n), kThreads, 0, launch_stream(images)>>>(pi, pe, po, B, C, H, W, p);
  check_launch("image.prepare");
}

}  // namespace

backend::ImageKernels image_kernels() { return {.prepare = prepare}; }

}  // namespace cmha::cuda
