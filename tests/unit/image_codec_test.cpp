// JPEG and PNG decoding against PIL (tests/reference/fixtures_image.py):
// every colour layout converted to RGB and to grey, and the errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data/image.h"
#include "support/check.h"
#include "support/source_paths.h"

namespace cmha::data {
namespace {

const std::string kImages = std::string(CMHA_FIXTURE_DIR) + "/images/";

int max_diff(const Image& a, const Tensor& expected) {  // expected: i32 [H, W, C]
  EXPECT_EQ(a.height, expected.size(0));
  EXPECT_EQ(a.width, expected.size(1));
  EXPECT_EQ(a.channels, expected.size(2));
  if (static_cast<int64_t>(a.pixels.size()) != expected.numel()) return 1000;
  const int32_t* e = expected.data<int32_t>();
  int worst = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) worst = std::max(worst, std::abs(int(a.pixels[i]) - e[i]));
  return worst;
}

TEST(ImageCodec, DecodesEveryLayoutAsPil) {
  const SafetensorsFile f = test::load_fixture("image_decode");
  for (const std::string name :
       {"rgb.png", "grey.png", "palette.png", "rgba.png", "grey_alpha.png", "rgb.jpg", "grey.jpg", "cmyk.jpg"}) {
    // Same libjpeg-turbo, same settings: exact; CMYK goes through PIL's own conversion formula.
    const int tol = name == "cmyk.jpg" ? 1 : 0;
    EXPECT_LE(max_diff(read_image_file(kImages + name, ColorMode::rgb), test::fixture_tensor(f, name + ".rgb")), tol)
        << name;
    EXPECT_LE(max_diff(read_image_file(kImages + name, ColorMode::grey), test::fixture_tensor(f, name + ".grey")),
              tol + 1)
        << name;
  }
  // 16-bit PNGs: the high byte of each sample.
  EXPECT_EQ(max_diff(read_image_file(kImages + "grey16.png", ColorMode::grey), test::fixture_tensor(f, "grey16.png.grey")),
            0);
  EXPECT_EQ(max_diff(read_image_file(kImages + "rgb16.png", ColorMode::rgb), test::fixture_tensor(f, "rgb16.png.rgb")),
            0);
}

TEST(ImageCodec, EncodeDecodeRoundTrip) {
  Image im(5, 6, 3);
  for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<uint8_t>(i * 7);
  const std::vector<uint8_t> png = encode_png(im);
  const Image back = decode_image(png.data(), png.size(), ColorMode::rgb, "mem.png");
  EXPECT_EQ(back.pixels, im.pixels);
  const std::vector<uint8_t> jpg = encode_jpeg(im, 95);
  const Image lossy = decode_image(jpg.data(), jpg.size(), ColorMode::rgb, "mem.jpg");
  EXPECT_EQ(lossy.height, 5);
  EXPECT_EQ(lossy.width, 6);
  EXPECT_EQ(lossy.channels, 3);
}

void expect_error_naming(const std::vector<uint8_t>& bytes, const std::string& name, const std::string& what) {
  try {
    decode_image(bytes.data(), bytes.size(), ColorMode::rgb, name);
    ADD_FAILURE() << "no error for " << what;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(name + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

TEST(ImageCodec, CorruptFilesAreOneErrorNamingThem) {
  Image im(8, 8, 3, 90);
  std::vector<uint8_t> png = encode_png(im), jpg = encode_jpeg(im);
  expect_error_naming(std::vector<uint8_t>(png.begin(), png.begin() + png.size() / 2), "cut.png", "corrupt PNG");
  png[40] ^= 0xFF;  // inside IDAT: the CRC fails
  expect_error_naming(png, "flipped.png", "corrupt PNG");
  expect_error_naming(std::vector<uint8_t>(jpg.begin(), jpg.begin() + 20), "cut.jpg", "corrupt JPEG");
  expect_error_naming({'G', 'I', 'F', '8', '9', 'a'}, "x.gif", "not a JPEG or PNG");
  expect_error_naming({}, "empty.jpg", "empty");
  try {
    read_image_file("/nonexistent/a.jpg", ColorMode::rgb);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/a.jpg"), std::string::npos);
  }
}

}  // namespace
}  // namespace cmha::data
