#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

#include "support/check.h"
#include "tensor/philox.h"
#include "tensor/rng.h"

using namespace cmha;

// Known-answer vectors of Philox4x32-10 from the Random123 distribution.
TEST(Philox, KnownAnswers) {
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}), (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

// The shared host/device functions of tensor/philox.h that the CUDA kernels
// call: the same known answers unwrapped, philox_counter splitting a 64-bit
// counter as philox_block does, and philox_unit equal to uint_to_unit.
TEST(Philox, SharedHostDeviceFunctions) {
  const PhiloxWords kat = philox4x32_10(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0);
  EXPECT_EQ(kat.w[0], 0xd16cfe09u);
  EXPECT_EQ(kat.w[1], 0x94fdccebu);
  EXPECT_EQ(kat.w[2], 0x5001e420u);
  EXPECT_EQ(kat.w[3], 0x24126ea1u);
  const std::array<uint32_t, 2> key{0xa4093822, 0x299f31d0};
  for (const uint64_t c : {uint64_t{0}, uint64_t{5}, (uint64_t{1} << 32) - 1, uint64_t{1} << 32, ~uint64_t{0}}) {
    const PhiloxWords r = philox_counter(c, key[0], key[1]);
    EXPECT_EQ((std::array<uint32_t, 4>{r.w[0], r.w[1], r.w[2], r.w[3]}), philox_block(c, key)) << c;
  }
  for (const uint32_t x : {0u, 255u, 256u, 0x80000000u, 0xffffffffu}) EXPECT_EQ(philox_unit(x), uint_to_unit(x)) << x;
  EXPECT_EQ(philox_unit(0xffffffffu), 1.0f - 1.0f / 16777216.0f);  // the largest value, below 1
}

namespace {
std::vector<float> draw(int threads, void (*fill)(Tensor&, Generator&)) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  Generator gen(1234);
  Tensor t = Tensor::empty({300001});
  fill(t, gen);
  omp_set_num_threads(saved);
  return t.to_float_vector();
}
void fill_uniform(Tensor& t, Generator& g) { uniform_(t, g); }
void fill_normal(Tensor& t, Generator& g) { normal_(t, g); }
void fill_trunc(Tensor& t, Generator& g) { trunc_normal_(t, g, 0.0f, 1.0f, -2.0f, 2.0f); }
}  // namespace

TEST(Philox, FillsDoNotDependOnThreadCount) {
  EXPECT_EQ(draw(1, fill_uniform), draw(2, fill_uniform));
  EXPECT_EQ(draw(1, fill_normal), draw(2, fill_normal));
  EXPECT_EQ(draw(1, fill_trunc), draw(2, fill_trunc));
}

TEST(Philox, DistributionsHaveTheRightMoments) {
  auto moments = [](const std::vector<float>& v) {
    double s = 0, s2 = 0;
    for (float x : v) s += x, s2 += static_cast<double>(x) * x;
    const double m = s / v.size();
    return std::pair<double, double>{m, std::sqrt(s2 / v.size() - m * m)};
  };
  auto [um, us] = moments(draw(2, fill_uniform));
  EXPECT_NEAR(um, 0.5, 0.003);
  EXPECT_NEAR(us, std::sqrt(1.0 / 12), 0.003);
  auto [nm, ns] = moments(draw(2, fill_normal));
  EXPECT_NEAR(nm, 0.0, 0.005);
  EXPECT_NEAR(ns, 1.0, 0.005);
  const auto t = draw(2, fill_trunc);
  for (float x : t) ASSERT_TRUE(x >= -2.0f && x <= 2.0f) << x;
  EXPECT_NEAR(moments(t).second, 0.8796, 0.005);  // std of N(0,1) truncated to ±2
}

TEST(Philox, SuccessiveDrawsDifferAndSeedsReproduce) {
  Generator a(5), b(5);
  Tensor x = Tensor::empty({16}), y = Tensor::empty({16}), z = Tensor::empty({16});
  uniform_(x, a);
  uniform_(y, a);
  uniform_(z, b);
  EXPECT_NE(x.to_float_vector(), y.to_float_vector());
  EXPECT_EQ(x.to_float_vector(), z.to_float_vector());
  EXPECT_EQ(a.offset(), 8u);  // 16 values -> 4 counters per draw
}

TEST(Philox, FillsStridedViewsInLogicalOrder) {
  Generator a(9), b(9);
  Tensor full = Tensor::zeros({4, 6});
  Tensor view = full.transpose(0, 1);  // [6, 4], not contiguous
  uniform_(view, a);
  Tensor ref = Tensor::empty({6, 4});
  uniform_(ref, b);
  EXPECT_TRUE(cmha::test::all_close(view, ref, 0, 0));
}
