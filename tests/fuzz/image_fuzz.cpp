// The JPEG (libjpeg-turbo) and PNG (libpng) decoder path on arbitrary bytes,
// to RGB and to grey: what decodes must hold exactly height × width ×
// channels bytes.
//
// Under a cap of 1 M pixels, not the default 89 M (Pillow's, as
// data.max_image_pixels): a JPEG whose entropy data stops at a marker decodes
// to grey (libjpeg's "premature end of data segment" warning, which Pillow
// accepts too), so a 100-byte file can cost a decode of the full cap — about
// a second at 89 M pixels in a release build, many more here. That work is
// bounded by the cap by design; the cap's check runs here the same.
#include <cstdint>
#include <cstdlib>

#include "data/image.h"
#include "fuzz_scratch.h"
#include "tensor/error.h"

constexpr int64_t kMaxPixels = int64_t{1} << 20;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using cmha::data::ColorMode;
  for (ColorMode mode : {ColorMode::rgb, ColorMode::grey}) {
    try {
      const cmha::data::Image im = cmha::data::decode_image(data, size, mode, "input", kMaxPixels);
      if (im.channels != cmha::data::channel_count(mode) ||
          im.pixels.size() != static_cast<size_t>(im.height * im.width * im.channels))
        std::abort();
      (void)cmha::fuzz::touch(im.pixels.data(), im.pixels.size());
    } catch (const cmha::Error&) {
    }
  }
  return 0;
}
