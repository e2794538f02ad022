#pragma once
// A sample's image as the transforms receive it, before decoding: its size
// (from the header for a JPEG) and, on request, the pixels of one region at a
// reduced DCT scale, so that a random crop or a centre crop decodes only the
// rows and columns it keeps, at the smallest scale that still covers its
// output. PNG files and images already in memory (IDX) are decoded whole and
// only at scale 1.
#include <cstdint>
#include <string>
#include <vector>

#include "data/image.h"

namespace cmha::data {

class ImageSource {
 public:
  explicit ImageSource(Image decoded);
  // Reads a JPEG's header only; decodes a PNG whole. A bad file is one error naming `name`.
  ImageSource(std::vector<uint8_t> bytes, ColorMode mode, std::string name,
              int64_t max_pixels = kDefaultMaxImagePixels);

  int64_t height() const { return height_; }
  int64_t width() const { return width_; }
  int64_t channels() const { return channels_; }
  // The smallest n of 1..8 at which a source region of h × w pixels keeps at
  // least need_h × need_w pixels (h·n/8 ≥ need_h, w·n/8 ≥ need_w); 8 for a
  // source that is not a JPEG, or when even the full scale does not cover.
  int scale_for(double h, double w, int64_t need_h, int64_t need_w) const;
  int64_t scaled_height(int n) const { return (height_ * n + 7) / 8; }  // libjpeg's ceil(H·n/8)
  int64_t scaled_width(int n) const { return (width_ * n + 7) / 8; }
  // Rows [y0, y1) and columns [x0, x1) of the image at scale n/8 (n = 8 unless
  // a JPEG): the region may start left of x0 (whole iMCUs); valid until the next call.
  const DecodedRegion& decode(int n, int64_t y0, int64_t y1, int64_t x0, int64_t x1);

 private:
  std::vector<uint8_t> jpeg_;  // empty: region_ holds the whole decoded image
  ColorMode mode_ = ColorMode::rgb;
  std::string name_;
  int64_t max_pixels_ = kDefaultMaxImagePixels;
  int64_t height_ = 0, width_ = 0, channels_ = 0;
  DecodedRegion region_;
};

}  // namespace cmha::data
