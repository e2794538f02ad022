// image.prepare on cuda:0 against the CPU: u8 batches of odd sizes (an odd
// batch's middle sample, grey and RGB), normalised alone, erased (boxes at
// the edges, a stream word past 2^32 so the Philox block counter's 32 bits
// wrap as the host's do), mixed (mixup, CutMix with a clipped and an empty
// box).
//
// Normalisation and mixing are IEEE divisions, subtractions, multiplies and
// one fmaf in a pinned order: the CPU's bits. An erased value is Box-Muller
// in double, whose log and cos CUDA rounds within an ulp or two of glibc;
// after the conversion to f32 the devices agree but at a rounding boundary
// (one f32 ulp at a few of the 10^4 values: a normalised error ≲ 1e-14), so
// erased batches are held to 1e-12, which any wrong word, box or stream
// exceeds by orders of magnitude.
#include <vector>

#include "backend/kernels.h"
#include "cuda/parity.h"

using namespace cmha;
using namespace cmha::test;

namespace {

Tensor random_pixels(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::empty(shape, DType::u8);
  uint8_t* p = t.data<uint8_t>();
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p[i] = static_cast<uint8_t>(x >> 24);
  }
  return t;
}

backend::ImagePrepareParams params_for(int64_t C) {
  backend::ImagePrepareParams p;
  p.channels = C;
  const float mean[] = {0.485f, 0.456f, 0.406f}, std[] = {0.229f, 0.224f, 0.225f};
  for (int64_t c = 0; c < C; ++c) p.mean[c] = mean[c], p.inv_std[c] = 1.0f / std[c];
  p.key[0] = 0x85EBCA6Bu, p.key[1] = 0x27D4EB2Fu, p.domain = 2;
  return p;
}

// Erase rows of B samples: every other sample erased, boxes anywhere up to the edges.
Tensor erase_rows(int64_t B, int64_t H, int64_t W, uint64_t first_word) {
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t h = b % 2 ? 0 : 1 + (b * 5) % H, w = 1 + (b * 3) % W;
    rows.insert(rows.end(), {(b * 7) % (H - h + 1), W - w, h, w, 1000 + b * 977, static_cast<int64_t>(first_word + b)});
  }
  return Tensor::from_vector_i64(rows, {B, backend::kEraseFields});
}

Tensor prepared_on(Device device, const Tensor& images, const Tensor& erase, const backend::ImagePrepareParams& p) {
  Tensor out = Tensor::empty(images.shape(), DType::f32, device);
  CMHA_KERNEL(device, image.prepare)(images.to(device), erase.defined() ? erase.to(device) : Tensor(), out, p);
  return out;
}

struct Shape4 {
  int64_t B, C, H, W;
};
const Shape4 kShapes[] = {{1, 3, 5, 7}, {2, 1, 8, 8}, {5, 3, 17, 13}, {8, 3, 32, 32}, {0, 3, 4, 4}};

}  // namespace

PARITY_TEST(ImagePrepareNormalisesAndMixesAsTheCpu, "image.prepare") {
  for (const Shape4& s : kShapes)
    for (const backend::ImageMix mix : {backend::ImageMix::none, backend::ImageMix::mixup, backend::ImageMix::cutmix}) {
      const Tensor x = random_pixels({s.B, s.C, s.H, s.W}, static_cast<uint64_t>(s.B * 100 + s.H));
      backend::ImagePrepareParams p = params_for(s.C);
      p.mix = mix;
      p.lambda = 0.3137f;
      p.y0 = 1, p.y1 = s.H, p.x0 = 0, p.x1 = s.W / 2;  // a box clipped at the bottom edge
      const Tensor want = prepared_on(Device::cpu(), x, Tensor(), p), got = prepared_on(gpu(), x, Tensor(), p);
      EXPECT_TRUE(same_as_cpu(got, want)) << "B " << s.B << ", C " << s.C << ", mix " << static_cast<int>(mix);
    }
}

PARITY_TEST(ImagePrepareErasesWithTheCpusDraws, "image.prepare") {
  for (const Shape4& s : kShapes)
    for (const uint64_t first_word : {uint64_t{0}, uint64_t{13}, (uint64_t{1} << 34) - 5})
      for (const backend::ImageMix mix : {backend::ImageMix::none, backend::ImageMix::mixup, backend::ImageMix::cutmix}) {
        if (s.B == 0) continue;
        const Tensor x = random_pixels({s.B, s.C, s.H, s.W}, first_word + static_cast<uint64_t>(s.W));
        backend::ImagePrepareParams p = params_for(s.C);
        p.mix = mix;
        p.lambda = 0.71f;
        p.y0 = 2, p.y1 = 2, p.x0 = 0, p.x1 = s.W;  // an empty CutMix box: nothing pasted
        const Tensor rows = erase_rows(s.B, s.H, s.W, first_word);
        const Tensor want = prepared_on(Device::cpu(), x, rows, p), got = prepared_on(gpu(), x, rows, p);
        EXPECT_TRUE(close_to_cpu(got, want, 1e-12))
            << "B " << s.B << ", C " << s.C << ", first word " << first_word << ", mix " << static_cast<int>(mix);
      }
}

PARITY_TEST(ImagePrepareRefusesWhatTheCpuRefuses, "image.prepare") {
  // A channel count other than the parameters' is an error on both devices
  // (on the asynchronous emulator at the next wait: the copy back).
  const Tensor x = random_pixels({2, 3, 4, 4}, 1);
  const backend::ImagePrepareParams p = params_for(1);
  for (const Device d : {Device::cpu(), gpu()}) {
    const Tensor out = Tensor::empty(x.shape(), DType::f32, d);
    EXPECT_THROW(
        {
          CMHA_KERNEL(d, image.prepare)(x.to(d), Tensor(), out, p);
          (void)out.to(Device::cpu());
        },
        Error)
        << d.str();
  }
}
