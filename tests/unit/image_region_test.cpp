// Decoding only what a crop needs: a JPEG region at a reduced DCT scale
// against the full decode, the crop boxes drawn from the header as from the
// decoded image, and the bound on how far a reduced-scale crop may move.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "data/image_loader.h"
#include "data/image_transforms.h"
#include "support/check.h"

namespace cmha::data {
namespace {

// A photo-like image: smooth shading, hard-edged shapes and sensor noise, so
// that it has the frequency content (and compresses) like a natural photo.
Image photo_like(int64_t H, int64_t W, uint64_t seed) {
  Image im(H, W, 3);
  uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
  auto next = [&] { return s ^= s << 13, s ^= s >> 7, s ^= s << 17; };
  const double fx = 0.02 + (next() % 100) * 1e-4, fy = 0.03 + (next() % 100) * 1e-4;
  const int64_t bx = next() % W, by = next() % H, r = 20 + next() % 60;
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      const int noise = static_cast<int>(next() % 13) - 6;
      const bool disc = (x - bx) * (x - bx) + (y - by) * (y - by) < r * r;
      const bool stripe = (x / 9 + y / 23) % 5 == 0;
      uint8_t* p = im.at(y, x);
      for (int c = 0; c < 3; ++c) {
        double v = 128 + 70 * std::sin(fx * x * (c + 1) + fy * y) + 40 * std::cos(0.011 * (x + 2 * y) + c);
        if (disc) v = 230 - 60 * c;
        if (stripe) v *= 0.6;
        p[c] = static_cast<uint8_t>(std::clamp(v + noise, 0.0, 255.0));
      }
    }
  return im;
}

// Rows [y0, y1) and columns [x0, x1) of a decoded region against the same block of `whole`.
struct Diff {
  int max = 0;
  double mean = 0;
};
Diff compare(const DecodedRegion& r, const Image& whole, int64_t y0, int64_t y1, int64_t x0, int64_t x1) {
  Diff d;
  int64_t n = 0;
  const int64_t C = whole.channels;
  for (int64_t y = y0; y < y1; ++y)
    for (int64_t x = x0; x < x1; ++x)
      for (int64_t c = 0; c < C; ++c) {
        const int e = std::abs(int(r.image.at(y - r.top, x - r.left)[c]) - int(whole.at(y, x)[c]));
        d.max = std::max(d.max, e), d.mean += e, ++n;
      }
  d.mean /= static_cast<double>(n);
  return d;
}

TEST(JpegRegion, FullScaleRegionIsTheFullDecodesBlock) {
  const std::vector<uint8_t> jpg = encode_jpeg(photo_like(97, 131, 1), 90);
  const Image full = decode_image(jpg.data(), jpg.size(), ColorMode::rgb, "mem.jpg");
  for (const auto& [y0, y1, x0, x1] : std::vector<std::array<int64_t, 4>>{
           {0, 97, 0, 131}, {5, 40, 16, 80}, {33, 97, 37, 131}, {1, 2, 0, 1}, {60, 96, 100, 101}}) {
    const DecodedRegion r = decode_jpeg_region(jpg.data(), jpg.size(), ColorMode::rgb, "mem.jpg", {8, y0, y1, x0, x1});
    EXPECT_EQ(r.top, y0);
    EXPECT_LE(r.left, x0);  // widened to whole iMCUs
    EXPECT_GE(r.left + r.image.width, x1);
    EXPECT_EQ(r.image.height, y1 - y0);
    EXPECT_EQ(compare(r, full, y0, y1, x0, x1).max, 0) << y0 << " " << x0;
  }
  // Grey output from an RGB JPEG: the same luma as the whole image's.
  const Image grey = decode_image(jpg.data(), jpg.size(), ColorMode::grey, "mem.jpg");
  const DecodedRegion g = decode_jpeg_region(jpg.data(), jpg.size(), ColorMode::grey, "mem.jpg", {8, 10, 30, 20, 50});
  EXPECT_EQ(g.image.channels, 1);
  EXPECT_EQ(compare(g, grey, 10, 30, 20, 50).max, 0);
}

TEST(JpegRegion, ReducedScaleRegionIsTheScaledDecodesBlock) {
  const std::vector<uint8_t> jpg = encode_jpeg(photo_like(97, 131, 2), 90);
  for (int n = 1; n <= 8; ++n) {
    const DecodedRegion whole = decode_jpeg_region(jpg.data(), jpg.size(), ColorMode::rgb, "mem.jpg", {n});
    EXPECT_EQ(whole.image.height, (97 * n + 7) / 8) << n;
    EXPECT_EQ(whole.image.width, (131 * n + 7) / 8) << n;
    const int64_t y0 = whole.image.height / 3, x0 = whole.image.width / 4;
    const int64_t y1 = whole.image.height - 1, x1 = whole.image.width - 2;
    const DecodedRegion r = decode_jpeg_region(jpg.data(), jpg.size(), ColorMode::rgb, "mem.jpg", {n, y0, y1, x0, x1});
    EXPECT_EQ(compare(r, whole.image, y0, y1, x0, x1).max, 0) << n;
  }
}

TEST(JpegRegion, HeaderSizeAndErrorsNameTheFile) {
  const std::vector<uint8_t> jpg = encode_jpeg(photo_like(40, 70, 3), 90);
  const ImageSize s = read_jpeg_size(jpg.data(), jpg.size(), "a.jpg");
  EXPECT_EQ(s.height, 40);
  EXPECT_EQ(s.width, 70);
  const std::string big = test::error_of([&] { read_jpeg_size(jpg.data(), jpg.size(), "big.jpg", 100); });
  EXPECT_EQ(big.rfind("big.jpg: the image is 70 × 40 pixels", 0), 0u) << big;
  const std::vector<uint8_t> cut(jpg.begin(), jpg.begin() + 30);
  EXPECT_EQ(test::error_of([&] { ImageSource(cut, ColorMode::rgb, "cut.jpg"); }).rfind("cut.jpg: corrupt JPEG", 0), 0u);
  // A file cut in its pixels: the rows read up to the cut are an error naming it.
  const std::vector<uint8_t> half(jpg.begin(), jpg.begin() + jpg.size() / 2);
  ImageSource src(half, ColorMode::rgb, "half.jpg");
  EXPECT_EQ(src.height(), 40);
  const std::string msg = test::error_of([&] { src.decode(8, 0, 40, 0, 70); });
  EXPECT_EQ(msg.rfind("half.jpg: corrupt JPEG image", 0), 0u) << msg;
  EXPECT_NE(test::error_of([&] { src.decode(8, 5, 5, 0, 70); }).find("is empty"), std::string::npos);
}

// A JPEG whose header reads but whose pixels are cut: the error comes from the
// transform (the region decode) and names the file; skip_bad_images skips it whole.
TEST(JpegRegion, ALoaderSkipsAJpegCutInItsPixels) {
  const std::string root = test::temp_dir("jpeg_region_loader");
  for (int i = 0; i < 4; ++i) {
    const std::string cls = root + "/c" + std::to_string(i % 2);
    std::filesystem::create_directories(cls);
    std::vector<uint8_t> jpg = encode_jpeg(photo_like(60, 80, i), 90);
    if (i == 3) {  // 40 bytes past the start of scan (0xFF 0xDA): the header reads, the pixels end early
      size_t sos = 0;
      while (sos + 1 < jpg.size() && !(jpg[sos] == 0xFF && jpg[sos + 1] == 0xDA)) ++sos;
      jpg.resize(sos + 40);
    }
    write_file(cls + "/" + std::to_string(i) + ".jpg", jpg);
  }
  const std::string bad = root + "/c1/3.jpg";
  auto ds = std::make_shared<ImageFolderDataset>(root, ColorMode::rgb);
  ImageSource src = ds->open(3);  // the header alone is fine
  EXPECT_EQ(src.width(), 80);
  ImageLoaderOptions o;
  o.batch_size = 4, o.workers = 0, o.training = false;
  o.transform.image_size = 32, o.transform.eval_resize = 40;
  ImageLoader strict(ds, o, 1);
  strict.start_epoch(0);
  ImageBatch b;
  const std::string msg = test::error_of([&] { strict.next(b); });
  EXPECT_EQ(msg.rfind(bad + ": corrupt JPEG image", 0), 0u) << msg;
  o.skip_bad_images = true;
  ImageLoader lenient(ds, o, 1);
  lenient.start_epoch(0);
  ASSERT_TRUE(lenient.next(b));
  EXPECT_EQ(b.images.size(0), 3);
  EXPECT_EQ(b.skipped, 1);
  std::filesystem::remove_all(root);
}

// The transform's u8 output, no flips.
ImageTransformOptions plain(int64_t S, bool random_crop) {
  ImageTransformOptions o;
  o.image_size = S;
  o.random_resized_crop = random_crop;
  o.hflip = false;
  return o;
}

TEST(ImageTransforms, CropBoxesAreDrawnAsBefore) {
  // The boxes of seed 7 on a 375×500 image, recorded before the decoder read them from the header.
  const std::vector<std::array<int64_t, 4>> expected = {
      {122, 294, 157, 174}, {116, 244, 224, 216}, {14, 90, 289, 333}, {11, 63, 306, 370},
      {6, 4, 368, 472},     {79, 2, 285, 234},    {47, 43, 302, 251},   {101, 76, 207, 260}};
  for (uint64_t s = 0; s < expected.size(); ++s) {
    SampleRandom rng(7, 0, s);
    const CropBox b = random_resized_crop_box(375, 500, 0.08f, 1.0f, 0.75f, 4.0f / 3, rng);
    EXPECT_EQ((std::array<int64_t, 4>{b.top, b.left, b.height, b.width}), expected[s]) << s;
  }
  // From a JPEG's header or from its decoded pixels: the same draws, so the
  // same stream position afterwards, and at full scale the same pixels.
  const Image im = photo_like(60, 80, 4);
  const std::vector<uint8_t> jpg = encode_jpeg(im, 90);
  const Image decoded = decode_image(jpg.data(), jpg.size(), ColorMode::rgb, "mem.jpg");
  ImageTransformOptions o = plain(56, true);  // boxes under 56 px: never reduced
  o.crop_scale_lo = 0.3f;
  o.hflip = true;
  o.random_erasing = 0.5f;
  for (uint64_t s = 0; s < 20; ++s) {
    std::vector<uint8_t> a(3 * 56 * 56), b(a.size());
    SampleRandom r1(5, 1, s), r2(5, 1, s);
    ImageSource src(jpg, ColorMode::rgb, "mem.jpg");
    const EraseDraw ea = transform_sample(src, o, true, r1, a.data());
    const EraseDraw eb = transform_sample(decoded, o, true, r2, b.data());
    EXPECT_EQ(a, b) << s;
    EXPECT_EQ((std::array<int64_t, 5>{ea.top, ea.left, ea.height, ea.width, static_cast<int64_t>(ea.first_word)}),
              (std::array<int64_t, 5>{eb.top, eb.left, eb.height, eb.width, static_cast<int64_t>(eb.first_word)}));
    EXPECT_EQ(r1.uniform(), r2.uniform()) << s;
  }
}

// DCT scaling averages 8/n × 8/n pixels inside the decoder before the
// antialiased resampling: not bit-identical to resampling the full decode,
// but within a few levels. Bound (200 crops and the eval transform of 8
// photo-like 375×500 q90 JPEGs, which have more hard edges than photos): mean
// |Δ| ≤ 1.5 levels, 99.9 % of the values within 12 (measured: train 0.59
// levels and 0.022 % beyond 12, eval 1.27 and 0.037 %).
TEST(ImageTransforms, ReducedScaleCropsStayCloseToTheFullDecode) {
  std::vector<std::vector<uint8_t>> jpgs;
  std::vector<Image> decoded;
  for (uint64_t k = 0; k < 8; ++k) {
    jpgs.push_back(encode_jpeg(photo_like(375, 500, k), 90));
    decoded.push_back(decode_image(jpgs[k].data(), jpgs[k].size(), ColorMode::rgb, "mem.jpg"));
  }
  for (const bool training : {true, false}) {
    std::vector<int64_t> histogram(256, 0);
    double total = 0;
    int64_t n = 0;
    int reduced = 0;
    const ImageTransformOptions o = plain(224, training);
    for (uint64_t s = 0; s < (training ? 200u : 8u); ++s) {
      std::vector<uint8_t> a(3 * 224 * 224), b(a.size());
      SampleRandom r1(3, 0, s), r2(3, 0, s);
      ImageSource src(jpgs[s % 8], ColorMode::rgb, "mem.jpg");
      transform_sample(src, o, training, r1, a.data());
      transform_sample(decoded[s % 8], o, training, r2, b.data());
      if (a != b) ++reduced;
      for (size_t i = 0; i < a.size(); ++i) {
        const int e = std::abs(static_cast<int>(a[i]) - static_cast<int>(b[i]));
        ++histogram[std::min(e, 255)], total += e, ++n;
      }
    }
    EXPECT_GT(reduced, training ? 60 : 7);  // the reduced scales are exercised
    EXPECT_LE(total / n, 1.5) << training;
    int64_t within = 0;
    for (int e = 0; e <= 12; ++e) within += histogram[e];
    EXPECT_GE(static_cast<double>(within) / n, 0.999) << training;
  }
}

}  // namespace
}  // namespace cmha::data
