#pragma once
// An 8-bit image as decoders produce it (height × width × channels, row-major,
// interleaved), and the JPEG (libjpeg-turbo) and PNG (libpng) codecs.
#include <cstdint>
#include <string>
#include <vector>

namespace cmha::data {

struct Image {
  int64_t height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;  // [height, width, channels]

  Image() = default;
  Image(int64_t h, int64_t w, int64_t c, uint8_t fill = 0)
      : height(h), width(w), channels(c), pixels(static_cast<size_t>(h * w * c), fill) {}
  uint8_t* at(int64_t y, int64_t x) { return pixels.data() + (y * width + x) * channels; }
  const uint8_t* at(int64_t y, int64_t x) const { return pixels.data() + (y * width + x) * channels; }
};

// What a decoder returns: 3 channels (grey is replicated) or 1 (luma,
// 0.299 R + 0.587 G + 0.114 B as PIL's convert("L")). Palette, alpha (dropped,
// not composited) and 16-bit PNGs are converted; CMYK JPEGs are an error.
enum class ColorMode { rgb, grey };
inline int64_t channel_count(ColorMode m) { return m == ColorMode::rgb ? 3 : 1; }

// A cap on decoded pixels (width × height), checked from the header before
// anything is allocated: a small file can declare a 30 000 × 30 000 image
// (2.7 GB decoded). Pillow's MAX_IMAGE_PIXELS, 1 GiB / 4 / 3 (its warning
// threshold; it refuses at twice that).
constexpr int64_t kDefaultMaxImagePixels = 89478485;

// Decodes JPEG or PNG bytes (told apart by their signature). `name` (the
// file) heads every error: a corrupt, truncated or unsupported image, or one
// of more than `max_pixels` pixels, is one cmha::Error sentence naming it.
Image decode_image(const uint8_t* data, size_t size, ColorMode mode, const std::string& name,
                   int64_t max_pixels = kDefaultMaxImagePixels);
Image read_image_file(const std::string& path, ColorMode mode, int64_t max_pixels = kDefaultMaxImagePixels);
// A file's bytes; a missing, special or unreadable file is one error naming it as `what`.
std::vector<uint8_t> read_file_bytes(const std::string& path, const std::string& what);

// ---- Decoding only what a transform needs (JPEG) ----
bool is_jpeg(const uint8_t* data, size_t size);
struct ImageSize {
  int64_t height = 0, width = 0;
};
// The size from the header alone (checked against `max_pixels`).
ImageSize read_jpeg_size(const uint8_t* data, size_t size, const std::string& name,
                         int64_t max_pixels = kDefaultMaxImagePixels);
// Rows [y0, y1) and columns [x0, x1) of the image decoded at scale n/8
// (libjpeg-turbo's DCT scaling: the scaled image is ceil(H·n/8) × ceil(W·n/8));
// a negative end means "to the last row/column".
struct JpegRegion {
  int scale_eighths = 8;
  int64_t y0 = 0, y1 = -1, x0 = 0, x1 = -1;
};
// The decoded pixels and where they sit in the scaled image: columns are
// widened to whole iMCUs, so `left` may be below the x0 asked for. Rows
// [y0, y1) and columns [x0, x1) are exactly those of the full decode at that scale.
struct DecodedRegion {
  Image image;
  int64_t top = 0, left = 0;
};
// Only the region's columns are inverse-transformed and colour-converted; the
// rows above it are entropy-decoded and skipped, the rows below are not read
// (so a file truncated below the region decodes without an error).
DecodedRegion decode_jpeg_region(const uint8_t* data, size_t size, ColorMode mode, const std::string& name,
                                 const JpegRegion& region, int64_t max_pixels = kDefaultMaxImagePixels);

// Encoders for tests, fixtures and benchmarks: PNG is lossless (1 or 3
// channels, 8-bit); JPEG at `quality` (1..100).
std::vector<uint8_t> encode_png(const Image& image);
std::vector<uint8_t> encode_jpeg(const Image& image, int quality = 90);
void write_file(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace cmha::data
