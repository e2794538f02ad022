// The step's image op (data/image_prepare.h, backend/image.h's image.prepare)
// against the loader's f32 path before issue 30 moved normalisation, random
// erasing and mixup/CutMix out of it: the same samples, the same draws, the
// same f32 bits (in the Release build, whose contraction of the former mixup
// image.prepare reproduces: see former_mix_is_fused). The reference below is
// that code, kept verbatim.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "data/image_prepare.h"
#include "data/image_transforms.h"
#include "data/mixup.h"
#include "data/rand_augment.h"
#include "support/check.h"

namespace cmha::data {
namespace {

// ---- the f32 path before issue 30 ----------------------------------------------

// to_normalised_chw, on the CHW pixels (the same arithmetic per value).
void reference_normalise(const uint8_t* chw, int64_t C, int64_t HW, const std::vector<float>& mean,
                         const std::vector<float>& std, float* out) {
  for (int64_t c = 0; c < C; ++c) {
    const float m = mean[c], inv = 1.0f / std[c];
    float* dst = out + c * HW;
    const uint8_t* src = chw + c * HW;
    for (int64_t i = 0; i < HW; ++i) dst[i] = (static_cast<float>(src[i]) / 255.0f - m) * inv;
  }
}

// SampleRandom::normal before it went through tensor/philox.h.
float reference_normal(SampleRandom& rng) {
  const double u1 = 1.0 - rng.uniform(), u2 = rng.uniform();
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

void reference_erase(float* chw, int64_t C, int64_t H, int64_t W, float prob, SampleRandom& rng) {
  if (prob <= 0 || !rng.bernoulli(prob)) return;
  const double area = static_cast<double>(H * W);
  const double log_lo = std::log(0.3), log_hi = std::log(1 / 0.3);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(0.02f, 1.0f / 3);
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * rng.uniform());
    const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(target * aspect)));
    const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(target / aspect)));
    if (w < W && h < H) {
      const int64_t top = rng.integer(0, H - h + 1), left = rng.integer(0, W - w + 1);
      for (int64_t c = 0; c < C; ++c)
        for (int64_t y = top; y < top + h; ++y)
          for (int64_t x = left; x < left + w; ++x) chw[(c * H + y) * W + x] = reference_normal(rng);
      return;
    }
  }
}

void reference_mix(float* x, int64_t B, int64_t C, int64_t H, int64_t W, const MixDecision& m) {
  if (m.lambda >= 1.0f && !m.cutmix) return;
  const int64_t per = C * H * W;
  for (int64_t b = 0; b < B / 2; ++b) {
    float* p = x + b * per;
    float* q = x + (B - 1 - b) * per;
    if (m.cutmix) {
      for (int64_t c = 0; c < C; ++c)
        for (int64_t y = m.y0; y < m.y1; ++y)
          std::swap_ranges(p + (c * H + y) * W + m.x0, p + (c * H + y) * W + m.x1, q + (c * H + y) * W + m.x0);
    } else {
      const float l = m.lambda, r = 1.0f - m.lambda;
      for (int64_t i = 0; i < per; ++i) {
        const float a = p[i], z = q[i];
        p[i] = a * l + z * r;
        q[i] = z * l + a * r;
      }
    }
  }
}

// ---- a batch both ways -------------------------------------------------------------

Image test_image(int64_t H, int64_t W, int64_t C, uint64_t k) {
  Image im(H, W, C);
  for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<uint8_t>((i * 37 + k * 101) % 251);
  return im;
}

struct BothWays {
  std::vector<float> before, after;
  int erased = 0;  // samples with an erase box
  backend::ImageMix mix = backend::ImageMix::none;
};

BothWays batch_both_ways(int64_t B, int64_t C, const ImageTransformOptions& o, const MixupOptions& mix, uint64_t seed) {
  const int64_t S = o.image_size, per = C * S * S;
  BothWays r{std::vector<float>(B * per), {}};
  Tensor pixels = Tensor::empty({B, C, S, S}, DType::u8);
  std::vector<int64_t> rows;
  ImageTransformOptions no_erasing = o;
  no_erasing.random_erasing = 0;
  for (int64_t b = 0; b < B; ++b) {
    const Image im = test_image(30 + b % 5, 40, C, static_cast<uint64_t>(b));
    SampleRandom before(seed, 1, static_cast<uint64_t>(b), 2), after(seed, 1, static_cast<uint64_t>(b), 2);
    std::vector<uint8_t> chw(per);
    transform_sample(im, no_erasing, true, before, chw.data());
    reference_normalise(chw.data(), C, S * S, o.mean, o.std, r.before.data() + b * per);
    reference_erase(r.before.data() + b * per, C, S, S, o.random_erasing, before);
    const EraseDraw e = transform_sample(im, o, true, after, pixels.data<uint8_t>() + b * per);
    rows.insert(rows.end(), {e.top, e.left, e.height, e.width, b, static_cast<int64_t>(e.first_word)});
    r.erased += e.height > 0;
  }
  SampleRandom mix_rng(seed, 1, 99, 3);
  const MixDecision m = draw_mix(mix, S, S, mix_rng);
  reference_mix(r.before.data(), B, C, S, S, m);
  backend::ImagePrepareParams p = normalisation_params(o.mean, o.std, C);
  const SampleRandom streams(seed, 1, 0, 2);
  p.key[0] = streams.key()[0], p.key[1] = streams.key()[1], p.domain = 2;
  set_mix(p, m);
  r.mix = p.mix;
  r.after = prepare_images(pixels, Tensor::from_vector_i64(rows, {B, backend::kEraseFields}), p).to_float_vector();
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Whether this file's build compiles the former mixup's `a * l + z * r` as
// fma(a, l, z * r), as the Release build's g++ -O3 -march=native did in the
// loader (and as image.prepare now computes it on purpose). The sanitized
// build (-O0 here, -O1 in the library) does not contract it: there the
// former path and the new one differ by an ulp at some values.
bool former_mix_is_fused() {
  std::vector<float> x(128);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.0137f * static_cast<float>(i) - 0.4f;
  const std::vector<float> in = x;
  MixDecision m;
  m.lambda = 0.3137f;
  reference_mix(x.data(), 2, 1, 8, 8, m);
  for (size_t i = 0; i < 64; ++i)
    if (x[i] != std::fma(in[i], m.lambda, in[64 + i] * (1.0f - m.lambda))) return false;
  return true;
}

// The former path's bits; where this build does not fuse as Release did, within
// 1e-6 relative: the mix's one ulp grows by 1/std through the normalisation.
::testing::AssertionResult as_before(const std::vector<float>& before, const std::vector<float>& after) {
  if (same_bits(before, after)) return ::testing::AssertionSuccess();
  if (former_mix_is_fused() || before.size() != after.size()) return ::testing::AssertionFailure() << "not the same bits";
  for (size_t i = 0; i < before.size(); ++i)
    if (std::fabs(after[i] - before[i]) > 1e-6f * std::max(1.0f, std::fabs(before[i])))
      return ::testing::AssertionFailure() << "value " << i << ": " << after[i] << " against " << before[i];
  return ::testing::AssertionSuccess();
}

ImageTransformOptions deit_transforms(int64_t S, int64_t C) {
  ImageTransformOptions o;
  o.image_size = S;
  o.rand_augment = true;
  o.rand_augment_config = parse_rand_augment("rand-m9-mstd0.5-inc1");
  o.random_erasing = 0.5f;
  if (C == 1) o.mean = {0.286f}, o.std = {0.353f};
  return o;
}

TEST(ImagePrepare, BatchesAreTheFormerF32PathBitForBit) {
  MixupOptions mixup;  // both on: batches switch between mixup and CutMix, some unmixed (prob 0.8)
  mixup.mixup_alpha = 0.8f, mixup.cutmix_alpha = 1.0f, mixup.prob = 0.8f;
  int erased = 0, mixes[3] = {0, 0, 0};
  for (const int64_t C : {int64_t{3}, int64_t{1}})
    for (const int64_t B : {int64_t{1}, int64_t{6}, int64_t{7}})  // an odd batch's middle sample is never mixed
      for (uint64_t seed = 0; seed < 6; ++seed) {
        const BothWays r = batch_both_ways(B, C, deit_transforms(24, C), mixup, seed);
        EXPECT_TRUE(as_before(r.before, r.after)) << "C " << C << ", B " << B << ", seed " << seed;
        erased += r.erased;
        ++mixes[static_cast<int>(r.mix)];
      }
  // Every path was taken: erased samples, unmixed, mixup and CutMix batches.
  EXPECT_GT(erased, 20);
  EXPECT_GT(mixes[0], 0);
  EXPECT_GT(mixes[1], 0);
  EXPECT_GT(mixes[2], 0);
}

TEST(ImagePrepare, ErasingMixupAndCutmixEachAsBefore) {
  // Each augmentation alone, so a difference names its op.
  ImageTransformOptions o = deit_transforms(20, 3);
  o.rand_augment = false;
  MixupOptions none;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    const BothWays r = batch_both_ways(5, 3, o, none, seed);
    EXPECT_TRUE(same_bits(r.before, r.after)) << "erasing, seed " << seed;
  }
  o.random_erasing = 0;
  MixupOptions mixup, cutmix;
  mixup.mixup_alpha = 0.8f;
  cutmix.cutmix_alpha = 1.0f;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    EXPECT_TRUE(as_before(batch_both_ways(6, 3, o, mixup, seed).before, batch_both_ways(6, 3, o, mixup, seed).after))
        << "mixup, seed " << seed;
    EXPECT_TRUE(same_bits(batch_both_ways(6, 3, o, cutmix, seed).before, batch_both_ways(6, 3, o, cutmix, seed).after))
        << "cutmix, seed " << seed;
  }
}

TEST(ImagePrepare, NormalDrawsAreTheFormerBoxMuller) {
  for (uint64_t s = 0; s < 50; ++s) {
    SampleRandom a(11, 3, s), b(11, 3, s);
    for (int i = 0; i < 40; ++i) {
      const float x = a.normal(), y = reference_normal(b);
      ASSERT_EQ(std::memcmp(&x, &y, sizeof x), 0) << s << " " << i;
    }
    EXPECT_EQ(a.position(), 80u);
  }
}

TEST(ImagePrepare, BadInputsAreErrorsNamingThem) {
  const backend::ImagePrepareParams p = normalisation_params({0.5f, 0.5f, 0.5f}, {0.2f, 0.2f, 0.2f}, 3);
  EXPECT_EQ(test::error_of([&] { prepare_images(Tensor::zeros({2, 3, 4, 4}), Tensor(), p); }),
            "prepare_images: expects u8 images [B, C, H, W], got f32[2, 3, 4, 4] on cpu");
  const Tensor u8 = Tensor::zeros({2, 3, 4, 4}, DType::u8);
  EXPECT_NE(test::error_of([&] { prepare_images(u8, Tensor::zeros({3, backend::kEraseFields}, DType::i64), p); })
                .find("image.prepare: erase must be contiguous i64 [2, 6]"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { prepare_images(Tensor::zeros({2, 1, 4, 4}, DType::u8), Tensor(), p); })
                .find("image.prepare: 1 channels, parameters for 3"),
            std::string::npos);
  EXPECT_EQ(test::error_of([] { normalisation_params({0.5f, 0.5f}, {0.2f, 0.2f}, 3); }),
            "normalise: 2 means and 2 stds for an image of 3 channels");
  EXPECT_EQ(test::error_of([] { normalisation_params({0, 0, 0, 0, 0}, {1, 1, 1, 1, 1}, 5); }),
            "normalise: images of 5 channels (at most 4)");
  EXPECT_NE(test::error_of([] { normalisation_params({0.5f}, {NAN}, 1); }).find("normalise: channel 0 has mean"),
            std::string::npos);
}

}  // namespace
}  // namespace cmha::data
