#pragma once
// Antialiased separable resampling (PIL's ImagingResample, torchvision's
// resize with antialias=True): the filter is stretched by the downscaling
// factor so that it averages every input sample it covers. Rows first, then
// columns, in f32, rounded to uint8 once. The taps can map a fractional
// source interval (a crop box of an image decoded at a reduced DCT scale)
// and compute only some of the outputs (a centre crop of a resize).
#include <cstdint>
#include <vector>

#include "data/image.h"

namespace cmha::data {

enum class Interpolation { bilinear, bicubic };

// The taps of outputs [out_first, out_first + count) of a 1-D resampling that
// maps the source interval [offset, offset + source_length) of a window of
// `window` samples onto `out_total` samples; taps are clipped to the window
// and indexed from its start.
struct Taps {
  std::vector<int64_t> first, count;
  std::vector<float> weights;  // [outputs, max_count]
  int64_t max_count = 0;
  int64_t size() const { return static_cast<int64_t>(first.size()); }
  int64_t lowest() const;   // the first sample any output reads
  int64_t highest() const;  // one past the last
  void shift(int64_t delta);  // re-index from another origin: first += delta
};
Taps make_taps(int64_t window, double offset, double source_length, int64_t out_total, int64_t out_first,
               int64_t count, Interpolation interp);
// The whole `in` → `out` resampling (offset 0, every output).
Taps make_taps(int64_t in, int64_t out, Interpolation interp);

// [ty.size(), tx.size(), C]: rows of `im` through ty, columns through tx (indices into `im`).
Image resample(const Image& im, const Taps& ty, const Taps& tx);

}  // namespace cmha::data
