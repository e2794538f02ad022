// The image transforms and RandAugment ops against torchvision / PIL
// (tests/reference/fixtures_image.py), and the random parts by property.
#include <gtest/gtest.h>

#include <cmath>

#include "data/image_prepare.h"
#include "data/image_transforms.h"
#include "data/rand_augment.h"
#include "support/check.h"

namespace cmha::data {
namespace {

Image image_of(const Tensor& t) {  // i32 [H, W, C] -> Image
  Image im(t.size(0), t.size(1), t.size(2));
  const int32_t* p = t.data<int32_t>();
  for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<uint8_t>(p[i]);
  return im;
}

// Largest |a - b| over the pixels; shapes must agree.
int max_diff(const Image& a, const Image& b) {
  EXPECT_EQ(a.height, b.height);
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.channels, b.channels);
  if (a.pixels.size() != b.pixels.size()) return 1000;
  int worst = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) worst = std::max(worst, std::abs(int(a.pixels[i]) - int(b.pixels[i])));
  return worst;
}

class ImageTransformsFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { file_ = new SafetensorsFile(test::load_fixture("image_transforms")); }
  static void TearDownTestSuite() { delete file_; }
  Image fx(const std::string& key) const { return image_of(test::fixture_tensor(*file_, key)); }
  static SafetensorsFile* file_;
};
SafetensorsFile* ImageTransformsFixture::file_ = nullptr;

TEST_F(ImageTransformsFixture, ResizeMatchesTorchvisionAntialiased) {
  for (const std::string c : {"rgb", "grey"}) {
    const Image in = fx("in." + c);
    // f32 accumulation in a different order: one level of rounding apart at most.
    EXPECT_LE(max_diff(resize(in, 7, 9), fx("resize_down." + c)), 1) << c;
    EXPECT_LE(max_diff(resize(in, 20, 25), fx("resize_up." + c)), 1) << c;
  }
  EXPECT_LE(max_diff(resize(fx("in.rgb"), 7, 9, Interpolation::bilinear), fx("resize_bilinear_down.rgb")), 1);
  EXPECT_LE(max_diff(resize_shorter_side(fx("in.rgb"), 10), fx("resize_shorter_10.rgb")), 1);
  EXPECT_LE(max_diff(resize(crop(fx("in.rgb"), 2, 3, 9, 11), 8, 8), fx("resized_crop.rgb")), 1);
}

TEST_F(ImageTransformsFixture, CropFlipAndNormaliseAreExact) {
  const Image in = fx("in.rgb");
  EXPECT_EQ(max_diff(center_crop(in, 8, 9), fx("center_crop_8x9.rgb")), 0);
  Image flipped = in;
  hflip(flipped);
  EXPECT_EQ(max_diff(flipped, fx("hflip.rgb")), 0);
  // Normalised by the step's first op (data/image_prepare.h) from the u8 CHW pixels.
  Tensor pixels = Tensor::empty({1, 3, in.height, in.width}, DType::u8);
  to_chw(in, pixels.data<uint8_t>());
  const Tensor out = prepare_images(pixels, Tensor(), normalisation_params({0.485f, 0.456f, 0.406f},
                                                                           {0.229f, 0.224f, 0.225f}, 3));
  EXPECT_TRUE(test::all_close(out.reshape({3, in.height, in.width}), test::fixture_tensor(*file_, "normalize.rgb"),
                              1e-5f, 1e-5f));
}

TEST_F(ImageTransformsFixture, PixelOpsMatchTorchvision) {
  struct Case {
    std::string key;
    std::function<void(Image&)> op;
    int tolerance;  // truncating blends may land one apart when f32 sums differ
  };
  const std::vector<Case> cases = {
      {"auto_contrast", auto_contrast, 1},
      {"equalize", equalize, 0},
      {"contrast_0.3", [](Image& im) { adjust_contrast(im, 0.3f); }, 1},
      {"contrast_1.7", [](Image& im) { adjust_contrast(im, 1.7f); }, 1},
      {"sharpness_0.3", [](Image& im) { adjust_sharpness(im, 0.3f); }, 1},
      {"sharpness_1.7", [](Image& im) { adjust_sharpness(im, 1.7f); }, 1},
  };
  for (const std::string c : {"rgb", "grey"})
    for (const Case& k : cases) {
      Image im = fx("in." + c);
      k.op(im);
      EXPECT_LE(max_diff(im, fx(k.key + "." + c)), k.tolerance) << k.key << "." << c;
    }
  const std::vector<Case> rgb_cases = {
      {"invert", invert, 0},
      {"posterize_3", [](Image& im) { posterize(im, 3); }, 0},
      {"solarize_100", [](Image& im) { solarize(im, 100); }, 0},
      {"color_0.3", [](Image& im) { adjust_color(im, 0.3f); }, 1},
      {"color_1.7", [](Image& im) { adjust_color(im, 1.7f); }, 1},
      {"brightness_0.3", [](Image& im) { adjust_brightness(im, 0.3f); }, 1},
      {"brightness_1.7", [](Image& im) { adjust_brightness(im, 1.7f); }, 1},
  };
  for (const Case& k : rgb_cases) {
    Image im = fx("in.rgb");
    k.op(im);
    EXPECT_LE(max_diff(im, fx(k.key + ".rgb")), k.tolerance) << k.key;
  }
}

TEST_F(ImageTransformsFixture, GeometricOpsMatchPilBicubic) {
  const std::array<uint8_t, 3> fill = {124, 116, 104};
  const std::vector<std::pair<std::string, std::function<void(Image&)>>> cases = {
      {"rotate_23.5", [&](Image& im) { rotate(im, 23.5f, fill); }},
      {"rotate_-17", [&](Image& im) { rotate(im, -17.0f, fill); }},
      {"shear_x_0.21", [&](Image& im) { shear_x(im, 0.21f, fill); }},
      {"shear_y_-0.27", [&](Image& im) { shear_y(im, -0.27f, fill); }},
      {"translate_x_3.4", [&](Image& im) { translate_x(im, 3.4f, fill); }},
      {"translate_y_-2.6", [&](Image& im) { translate_y(im, -2.6f, fill); }},
  };
  for (const auto& [key, op] : cases) {
    Image im = fx("in.rgb");
    op(im);
    EXPECT_LE(max_diff(im, fx(key + ".rgb")), 1) << key;
  }
}

TEST(ImageTransforms, HandComputedOps) {
  Image im(1, 4, 1);
  im.pixels = {10, 127, 128, 250};
  Image a = im;
  solarize_add(a, 110);  // below 128: +110, saturating
  EXPECT_EQ(a.pixels, (std::vector<uint8_t>{120, 237, 128, 250}));
  Image b = im;
  posterize(b, 0);  // keeps no bit
  EXPECT_EQ(b.pixels, (std::vector<uint8_t>{0, 0, 0, 0}));
  Image c = im;
  solarize(c, 256);  // timm's increasing solarize at magnitude 0: nothing inverted
  EXPECT_EQ(c.pixels, im.pixels);
  Image d = im;
  translate_x(d, 1.0f, {7, 7, 7});  // whole-pixel shift left: the last column is filled
  EXPECT_EQ(d.pixels, (std::vector<uint8_t>{127, 128, 250, 7}));
}

TEST(ImageTransforms, RandomResizedCropBoxesStayInsideAndInRange) {
  for (uint64_t s = 0; s < 200; ++s) {
    SampleRandom rng(3, 0, s);
    const CropBox b = random_resized_crop_box(40, 60, 0.08f, 1.0f, 0.75f, 4.0f / 3, rng);
    ASSERT_GE(b.top, 0);
    ASSERT_GE(b.left, 0);
    ASSERT_LE(b.top + b.height, 40);
    ASSERT_LE(b.left + b.width, 60);
    const double area = double(b.height * b.width) / (40 * 60);
    EXPECT_GE(area, 0.06) << s;  // rounding of the sides moves the area a little
  }
  // An impossible ratio range falls back to the centre crop at the nearest ratio.
  SampleRandom rng(3, 0, 0);
  const CropBox b = random_resized_crop_box(10, 40, 1.0f, 1.0f, 0.5f, 1.0f, rng);
  EXPECT_EQ(b.height, 10);
  EXPECT_EQ(b.width, 10);
  EXPECT_EQ(b.left, 15);
}

TEST(ImageTransforms, RandomErasingFillsOneBoxWithNormalValues) {
  // The box drawn on the host, its values drawn by the step's op (data/image_prepare.h).
  const int64_t C = 3, H = 16, W = 16;
  int erased_images = 0;
  for (uint64_t s = 0; s < 40; ++s) {
    SampleRandom rng(1, 0, s);
    const EraseDraw e = draw_random_erase(H, W, 0.5f, rng);
    const Tensor rows = Tensor::from_vector_i64({e.top, e.left, e.height, e.width, static_cast<int64_t>(s),
                                                 static_cast<int64_t>(e.first_word)}, {1, 6});
    backend::ImagePrepareParams p = normalisation_params({0, 0, 0}, {1, 1, 1}, C);
    p.key[0] = rng.key()[0], p.key[1] = rng.key()[1], p.domain = rng.domain();
    const Tensor x = prepare_images(Tensor::full({1, C, H, W}, 255, DType::u8), rows, p);  // 1.0 where not erased
    int64_t changed = 0;
    for (float v : x.to_float_vector())
      if (v != 1.0f) {
        ++changed;
        EXPECT_LT(std::abs(v), 10.0f);  // standard normal values
      }
    if (changed == 0) continue;
    ++erased_images;
    EXPECT_EQ(changed % C, 0);
    EXPECT_GE(changed / C, int64_t(0.02 * H * W * 0.5));
  }
  EXPECT_GT(erased_images, 8);   // about half of 40
  EXPECT_LT(erased_images, 32);
}

TEST(ImageTransforms, TrainSampleIsDeterministicPerStream) {
  Image im(30, 40, 3);
  for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<uint8_t>(i * 37 % 251);
  ImageTransformOptions o;
  o.image_size = 16;
  o.rand_augment = true;
  o.rand_augment_config = parse_rand_augment("rand-m9-mstd0.5-inc1");
  o.random_erasing = 0.25f;
  std::vector<uint8_t> a(3 * 16 * 16), b(a.size()), c(a.size());
  SampleRandom r1(9, 2, 5), r2(9, 2, 5), r3(9, 2, 6);
  transform_sample(im, o, true, r1, a.data());
  transform_sample(im, o, true, r2, b.data());
  transform_sample(im, o, true, r3, c.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // Eval: resize the shorter side to eval_resize then centre-crop, no randomness.
  o.eval_resize = 20;
  std::vector<uint8_t> e(a.size()), expected(a.size());
  const EraseDraw none = transform_sample(im, o, false, r1, e.data());
  EXPECT_EQ(none.height, 0);  // evaluation never erases
  to_chw(center_crop(resize_shorter_side(im, 20), 16, 16), expected.data());
  EXPECT_EQ(e, expected);
}

TEST(ImageTransforms, GreyImagesGoThroughEveryOp) {
  Image im(9, 11, 1);
  for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<uint8_t>(i * 29 % 256);
  RandAugmentConfig cfg = parse_rand_augment("rand-n15-m9-mstd0.5-inc1-p1");  // 15 ops, always applied
  cfg.fill = {200, 0, 0};  // grey images fill with the first value
  Image rotated = im;
  rotate(rotated, 90.0f, cfg.fill);
  EXPECT_EQ(rotated.channels, 1);
  EXPECT_EQ(rotated.at(0, 0)[0], 200);  // a corner leaves the frame of a 9×11 image turned by 90°
  for (uint64_t s = 0; s < 10; ++s) {
    Image x = im;
    SampleRandom rng(2, 0, s);
    rand_augment(x, cfg, rng);
    ASSERT_EQ(x.channels, 1);
    ASSERT_EQ(x.pixels.size(), im.pixels.size());
  }
}

TEST(RandAugment, ParsesTimmSpecs) {
  const RandAugmentConfig c = parse_rand_augment("rand-m9-mstd0.5-inc1");
  EXPECT_EQ(c.num_ops, 2);
  EXPECT_FLOAT_EQ(c.magnitude, 9);
  EXPECT_FLOAT_EQ(c.magnitude_std, 0.5f);
  EXPECT_TRUE(c.increasing);
  const RandAugmentConfig d = parse_rand_augment("rand-n3-m5-inc1-p0.7");
  EXPECT_EQ(d.num_ops, 3);
  EXPECT_FLOAT_EQ(d.magnitude, 5);
  EXPECT_FLOAT_EQ(d.magnitude_std, 0);
  EXPECT_FLOAT_EQ(d.prob, 0.7f);
  for (const std::string bad : {"m9-mstd0.5", "rand-m9-q3-inc1", "rand-mx-inc1", "rand-m9"}) {
    try {
      parse_rand_augment(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(RandAugment, ChangesImagesDeterministically) {
  Image im(12, 12, 3);
  for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<uint8_t>(i * 13 % 256);
  const RandAugmentConfig cfg = parse_rand_augment("rand-m9-mstd0.5-inc1");
  int changed = 0;
  for (uint64_t s = 0; s < 20; ++s) {
    Image a = im, b = im;
    SampleRandom r1(4, 0, s), r2(4, 0, s);
    rand_augment(a, cfg, r1);
    rand_augment(b, cfg, r2);
    EXPECT_EQ(a.pixels, b.pixels);
    changed += a.pixels != im.pixels;
  }
  // Each of 2 ops applies with p 0.5: about 3/4 of the images change.
  EXPECT_GT(changed, 8);
  EXPECT_LT(changed, 20);
}

}  // namespace
}  // namespace cmha::data
