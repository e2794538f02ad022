#include "data/image.h"

#include <jpeglib.h>
#include <jerror.h>  // after jpeglib.h, which it needs
#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "tensor/error.h"
#include "tensor/regular_file.h"

namespace cmha::data {

namespace {

// PIL's convert("L"): ITU-R 601-2 luma in 16-bit fixed point, rounded.
uint8_t luma(const uint8_t* rgb) {
  return static_cast<uint8_t>((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
}

// 1- or 3-channel image → the channels `mode` asks for.
Image to_mode(Image im, ColorMode mode) {
  const int64_t want = channel_count(mode);
  if (im.channels == want) return im;
  Image out(im.height, im.width, want);
  const int64_t n = im.height * im.width;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* s = im.pixels.data() + i * im.channels;
    uint8_t* d = out.pixels.data() + i * want;
    if (want == 1)
      d[0] = luma(s);
    else
      d[0] = d[1] = d[2] = s[0];
  }
  return out;
}

// ---- JPEG ----
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}
// Warnings (e.g. extraneous bytes) are not errors, except a file that ends
// before its image does: libjpeg would fill the rest with grey, so a 100-byte
// file could pass for a 50-megapixel image (and take a second to decode).
// Pillow refuses it too ("image file is truncated").
void jpeg_warning(j_common_ptr cinfo, int msg_level) {
  if (msg_level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_error_exit(cinfo);
}

// The error sentence of an image larger than the cap, or "".
std::string too_many_pixels(int64_t height, int64_t width, int64_t max_pixels, const std::string& name) {
  if (height * width <= max_pixels) return "";  // each at most 2^32 - 1: no overflow
  return name + ": the image is " + std::to_string(width) + " × " + std::to_string(height) + " pixels, more than the " +
         std::to_string(max_pixels) + " allowed (data.max_image_pixels)";
}

// Opens `cinfo` on the bytes and reads the header: the image's size is checked
// against the cap before anything is decoded.
void open_jpeg(jpeg_decompress_struct& cinfo, const uint8_t* data, size_t size, const std::string& name,
               int64_t max_pixels) {
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  if (const std::string big = too_many_pixels(cinfo.image_height, cinfo.image_width, max_pixels, name); !big.empty())
    throw Error(big);  // thrown out of the caller's setjmp scope, which destroys cinfo first
}

DecodedRegion decode_jpeg(const uint8_t* data, size_t size, ColorMode mode, const std::string& name,
                          int64_t max_pixels, const JpegRegion& want) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  err.mgr.emit_message = jpeg_warning;
  // Declared before setjmp so that a longjmp never skips their lifetimes.
  DecodedRegion region;
  std::vector<uint8_t> raw;
  std::string big;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    throw Error(name + ": corrupt JPEG image (" + err.message + ")");
  }
  try {
    open_jpeg(cinfo, data, size, name, max_pixels);
  } catch (const Error& e) {
    big = e.what();
  }
  if (!big.empty()) {
    jpeg_destroy_decompress(&cinfo);
    throw Error(big);
  }
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  const bool grey = cinfo.jpeg_color_space == JCS_GRAYSCALE;
  cinfo.out_color_space = cmyk ? JCS_CMYK : grey ? JCS_GRAYSCALE : JCS_RGB;
  CMHA_CHECK(want.scale_eighths >= 1 && want.scale_eighths <= 8,
             name + ": JPEG scale " + std::to_string(want.scale_eighths) + "/8 is outside 1/8..8/8");
  cinfo.scale_num = static_cast<unsigned>(want.scale_eighths);
  cinfo.scale_denom = 8;
  jpeg_start_decompress(&cinfo);
  // The wanted rows and columns of the scaled image (negative ends: all of it).
  const int64_t OH = cinfo.output_height, OW = cinfo.output_width;
  const int64_t y0 = std::clamp<int64_t>(want.y0, 0, OH), y1 = want.y1 < 0 ? OH : std::clamp<int64_t>(want.y1, y0, OH);
  const int64_t x0 = std::clamp<int64_t>(want.x0, 0, OW), x1 = want.x1 < 0 ? OW : std::clamp<int64_t>(want.x1, x0, OW);
  if (y1 <= y0 || x1 <= x0) {
    jpeg_destroy_decompress(&cinfo);
    throw Error(name + ": the JPEG region rows [" + std::to_string(y0) + ", " + std::to_string(y1) + "), columns [" +
                std::to_string(x0) + ", " + std::to_string(x1) + ") is empty");
  }
  // Columns: libjpeg-turbo widens the crop to whole iMCUs, so the region may
  // start left of x0. It upsamples the chroma of the crop as if its edges were
  // the image's, so a crop's edge column may differ from the full decode by a
  // level or two: one more column each side keeps [x0, x1) exact.
  const int64_t c0 = std::max<int64_t>(x0 - 1, 0), c1 = std::min(x1 + 1, OW);
  auto xoffset = static_cast<JDIMENSION>(c0), width = static_cast<JDIMENSION>(c1 - c0);
  if (c1 - c0 < OW) jpeg_crop_scanline(&cinfo, &xoffset, &width);
  const int64_t W = cinfo.output_width, C = cinfo.output_components;
  raw.resize(static_cast<size_t>((y1 - y0) * W * C));
  // Rows above the region are entropy-decoded only; rows below are not read at all.
  while (static_cast<int64_t>(cinfo.output_scanline) < y0)
    jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(y0 - cinfo.output_scanline));
  while (static_cast<int64_t>(cinfo.output_scanline) < y1) {
    JSAMPROW row = raw.data() + static_cast<size_t>(cinfo.output_scanline - y0) * W * C;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  const bool adobe_inverted = cinfo.saw_Adobe_marker;
  // A whole image is read to its end (a truncated tail is an error); a region stops at its last row.
  if (cinfo.output_scanline == cinfo.output_height)
    jpeg_finish_decompress(&cinfo);
  else
    jpeg_abort_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  const int64_t H = y1 - y0;
  Image im;
  if (cmyk) {
    // CMYK → RGB as PIL does: Photoshop writes inverted CMYK (Adobe marker),
    // so R = C·K/255; plain CMYK is R = (255 - C)(255 - K)/255.
    im = Image(H, W, 3);
    for (int64_t i = 0; i < H * W; ++i) {
      const uint8_t* s = raw.data() + i * 4;
      for (int c = 0; c < 3; ++c) {
        const int v = adobe_inverted ? s[c] * s[3] : (255 - s[c]) * (255 - s[3]);
        im.pixels[i * 3 + c] = static_cast<uint8_t>((v + 127) / 255);
      }
    }
  } else {
    im.height = H, im.width = W, im.channels = C, im.pixels = std::move(raw);
  }
  region.image = to_mode(std::move(im), mode);
  region.top = y0, region.left = static_cast<int64_t>(xoffset);
  return region;
}

// ---- PNG ----
struct PngReader {
  const uint8_t* data;
  size_t size, pos;
  std::string message;
};

void png_error_fn(png_structp png, png_const_charp msg) {
  auto* r = static_cast<PngReader*>(png_get_error_ptr(png));
  if (r) r->message = msg;
  png_longjmp(png, 1);
}
void png_warning_fn(png_structp, png_const_charp) {}

void png_read_fn(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<PngReader*>(png_get_io_ptr(png));
  if (r->pos + n > r->size) png_error(png, "the file ends early");
  std::memcpy(out, r->data + r->pos, n);
  r->pos += n;
}

Image decode_png(const uint8_t* data, size_t size, ColorMode mode, const std::string& name, int64_t max_pixels) {
  PngReader reader{data, size, 0, ""};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, png_error_fn, png_warning_fn);
  CMHA_CHECK(png, name + ": cannot allocate a PNG decoder");
  png_infop info = png_create_info_struct(png);
  // Declared before setjmp so that a longjmp never skips their lifetimes.
  Image im;
  std::vector<png_bytep> rows;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    throw Error(name + ": corrupt PNG image (" + reader.message + ")");
  }
  png_set_read_fn(png, &reader, png_read_fn);
  png_read_info(png, info);
  if (const std::string big = too_many_pixels(png_get_image_height(png, info), png_get_image_width(png, info),
                                              max_pixels, name);
      !big.empty()) {
    png_destroy_read_struct(&png, &info, nullptr);
    throw Error(big);
  }
  const int color = png_get_color_type(png, info);
  // Everything to 8-bit grey or RGB, alpha dropped (PIL's convert("RGB") from RGBA).
  png_set_strip_16(png);  // keep the high byte, as PIL does
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8) png_set_expand_gray_1_2_4_to_8(png);
  png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const int64_t H = png_get_image_height(png, info), W = png_get_image_width(png, info);
  const int64_t C = png_get_channels(png, info);
  if (C != 1 && C != 3) png_error(png, "unsupported channel layout");
  im = Image(H, W, C);
  rows.resize(static_cast<size_t>(H));
  for (int64_t y = 0; y < H; ++y) rows[y] = im.at(y, 0);
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return to_mode(std::move(im), mode);
}

void png_write_fn(png_structp png, png_bytep in, png_size_t n) {
  auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), in, in + n);
}
void png_flush_fn(png_structp) {}

}  // namespace

Image decode_image(const uint8_t* data, size_t size, ColorMode mode, const std::string& name, int64_t max_pixels) {
  static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 8 && std::memcmp(data, png_sig, 8) == 0) return decode_png(data, size, mode, name, max_pixels);
  if (is_jpeg(data, size)) return decode_jpeg(data, size, mode, name, max_pixels, JpegRegion{}).image;
  throw Error(name + ": not a JPEG or PNG image (" + (size == 0 ? std::string("the file is empty") : "unknown signature") +
              ")");
}

bool is_jpeg(const uint8_t* data, size_t size) {
  return size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

ImageSize read_jpeg_size(const uint8_t* data, size_t size, const std::string& name, int64_t max_pixels) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  err.mgr.emit_message = jpeg_warning;
  std::string big;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    throw Error(name + ": corrupt JPEG image (" + err.message + ")");
  }
  try {
    open_jpeg(cinfo, data, size, name, max_pixels);
  } catch (const Error& e) {
    big = e.what();
  }
  const ImageSize s{cinfo.image_height, cinfo.image_width};
  jpeg_destroy_decompress(&cinfo);
  if (!big.empty()) throw Error(big);
  return s;
}

DecodedRegion decode_jpeg_region(const uint8_t* data, size_t size, ColorMode mode, const std::string& name,
                                 const JpegRegion& region, int64_t max_pixels) {
  return decode_jpeg(data, size, mode, name, max_pixels, region);
}

std::vector<uint8_t> read_file_bytes(const std::string& path, const std::string& what) {
  refuse_special_file(path, what);
  std::ifstream in(path, std::ios::binary);
  CMHA_CHECK(in, path + ": cannot open the " + what);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CMHA_CHECK(!in.bad(), path + ": cannot read the " + what);
  return bytes;
}

Image read_image_file(const std::string& path, ColorMode mode, int64_t max_pixels) {
  const std::vector<uint8_t> bytes = read_file_bytes(path, "image file");
  return decode_image(bytes.data(), bytes.size(), mode, path, max_pixels);
}

std::vector<uint8_t> encode_png(const Image& im) {
  CMHA_CHECK(im.channels == 1 || im.channels == 3, "encode_png: 1 or 3 channels, not " + std::to_string(im.channels));
  std::vector<uint8_t> out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, png_error_fn, png_warning_fn);
  png_infop info = png_create_info_struct(png);
  std::vector<png_bytep> rows(static_cast<size_t>(im.height));
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    throw Error("encode_png: libpng failed");
  }
  png_set_write_fn(png, &out, png_write_fn, png_flush_fn);
  png_set_IHDR(png, info, static_cast<png_uint_32>(im.width), static_cast<png_uint_32>(im.height), 8,
               im.channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  for (int64_t y = 0; y < im.height; ++y) rows[y] = const_cast<png_bytep>(im.at(y, 0));
  png_write_info(png, info);
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

std::vector<uint8_t> encode_jpeg(const Image& im, int quality) {
  CMHA_CHECK(im.channels == 1 || im.channels == 3, "encode_jpeg: 1 or 3 channels, not " + std::to_string(im.channels));
  jpeg_compress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&cinfo);
    std::free(buffer);
    throw Error(std::string("encode_jpeg: ") + err.message);
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = static_cast<JDIMENSION>(im.width);
  cinfo.image_height = static_cast<JDIMENSION>(im.height);
  cinfo.input_components = static_cast<int>(im.channels);
  cinfo.in_color_space = im.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(im.at(cinfo.next_scanline, 0));
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::vector<uint8_t> out(buffer, buffer + size);
  jpeg_destroy_compress(&cinfo);
  std::free(buffer);
  return out;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  CMHA_CHECK(out, path + ": cannot write the file");
}

}  // namespace cmha::data
