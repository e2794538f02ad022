// The JPEG (libjpeg-turbo) and PNG (libpng) decoder path on arbitrary bytes,
// to RGB and to grey, under the default pixel cap (Pillow's, as
// data.max_image_pixels): what decodes must hold exactly height × width ×
// channels bytes.
#include <cstdint>
#include <cstdlib>

#include "data/image.h"
#include "fuzz_scratch.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using cmha::data::ColorMode;
  for (ColorMode mode : {ColorMode::rgb, ColorMode::grey}) {
    try {
      const cmha::data::Image im = cmha::data::decode_image(data, size, mode, "input");
      if (im.channels != cmha::data::channel_count(mode) ||
          im.pixels.size() != static_cast<size_t>(im.height * im.width * im.channels))
        std::abort();
      (void)cmha::fuzz::touch(im.pixels.data(), im.pixels.size());
    } catch (const cmha::Error&) {
    }
  }
  return 0;
}
