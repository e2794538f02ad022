#include "data/image_source.h"

#include "tensor/error.h"

namespace cmha::data {

ImageSource::ImageSource(Image decoded)
    : height_(decoded.height), width_(decoded.width), channels_(decoded.channels) {
  region_.image = std::move(decoded);
}

ImageSource::ImageSource(std::vector<uint8_t> bytes, ColorMode mode, std::string name, int64_t max_pixels)
    : mode_(mode), name_(std::move(name)), max_pixels_(max_pixels) {
  if (is_jpeg(bytes.data(), bytes.size())) {
    const ImageSize s = read_jpeg_size(bytes.data(), bytes.size(), name_, max_pixels_);
    height_ = s.height, width_ = s.width, channels_ = channel_count(mode_);
    jpeg_ = std::move(bytes);
  } else {
    region_.image = decode_image(bytes.data(), bytes.size(), mode_, name_, max_pixels_);
    height_ = region_.image.height, width_ = region_.image.width, channels_ = region_.image.channels;
  }
}

int ImageSource::scale_for(double h, double w, int64_t need_h, int64_t need_w) const {
  if (jpeg_.empty()) return 8;
  for (int n = 1; n < 8; ++n)
    if (h * n / 8 >= static_cast<double>(need_h) && w * n / 8 >= static_cast<double>(need_w)) return n;
  return 8;
}

const DecodedRegion& ImageSource::decode(int n, int64_t y0, int64_t y1, int64_t x0, int64_t x1) {
  if (jpeg_.empty()) {
    CMHA_CHECK(n == 8, name_ + ": only a JPEG decodes at a reduced scale (" + std::to_string(n) + "/8 asked)");
    return region_;  // the whole image: every region is inside it
  }
  region_ = decode_jpeg_region(jpeg_.data(), jpeg_.size(), mode_, name_, JpegRegion{n, y0, y1, x0, x1}, max_pixels_);
  return region_;
}

}  // namespace cmha::data
