// GPU parity of the layer_norm entries (backend/layer_norm.h): forward with
// and without weight and bias, rows of odd lengths (a warp per row up to
// 1024, a block beyond), a mean far from 0 (the two-pass statistics), eps 0
// and 1e-5; backward with every combination of dx, dweight, dbias wanted,
// with and without weight, over enough rows for the chunked dweight/dbias.
//
// Tolerances.
// - mean, rstd, y: the statistics are double sums on both sides in another
//   order (~1e-16 relative apart), so μ and rstd round to the same f32 or
//   one ulp apart: 1e-12 normalised.
// - dx: the row means of ĝ and ĝ·x̂ are f32 sums in another order: a few
//   ulp per element, 1e-12.
// - dweight, dbias: the CPU adds f32 blocks of 32 rows into double, the GPU
//   adds f32 products into double directly: the CPU's block sums carry
//   ~√32 ulp each (~3e-7 relative), column sums of random signs cancel to
//   ~√rows of their terms: normalised error ~1e-13, so 1e-11.
#include <gtest/gtest.h>

#include <string>

#include "backend/kernels.h"
#include "cuda/parity.h"

using namespace cmha;
using namespace cmha::test;

namespace {

constexpr double kLayerNormTolerance = 1e-12;
constexpr double kAffineTolerance = 1e-11;

struct LayerNormCase {
  int64_t rows, d;
  bool weight, bias;
  float eps;
  double center;  // the rows' mean
};

std::string describe(const LayerNormCase& c) {
  return "[" + std::to_string(c.rows) + ", " + std::to_string(c.d) + "]" + (c.weight ? " weight" : "") +
         (c.bias ? " bias" : "") + " eps " + std::to_string(c.eps) + " center " + std::to_string(c.center);
}

Tensor on(const Tensor& t, Device device) { return t.defined() ? t.contiguous().to(device) : Tensor(); }

void expect_parity(const LayerNormCase& c, uint64_t seed, Device gpu) {
  const Tensor x = random_of({c.rows, c.d}, DType::f32, seed, c.center - 1.0, c.center + 1.0);
  const Tensor w = c.weight ? random_of({c.d}, DType::f32, seed + 1, 0.5, 1.5) : Tensor();
  const Tensor b = c.bias ? random_of({c.d}, DType::f32, seed + 2) : Tensor();
  Tensor y_cpu = Tensor::empty({c.rows, c.d}), mean_cpu = Tensor::empty({c.rows}), rstd_cpu = Tensor::empty({c.rows});
  Tensor y_gpu = Tensor::empty({c.rows, c.d}, DType::f32, gpu), mean_gpu = Tensor::empty({c.rows}, DType::f32, gpu),
         rstd_gpu = Tensor::empty({c.rows}, DType::f32, gpu);
  CMHA_KERNEL(Device::cpu(), layer_norm.forward)(x, w, b, y_cpu, mean_cpu, rstd_cpu, c.eps);
  CMHA_KERNEL(gpu, layer_norm.forward)(on(x, gpu), on(w, gpu), on(b, gpu), y_gpu, mean_gpu, rstd_gpu, c.eps);
  EXPECT_TRUE(close_to_cpu(mean_gpu, mean_cpu, kLayerNormTolerance)) << describe(c) << " mean";
  EXPECT_TRUE(close_to_cpu(rstd_gpu, rstd_cpu, kLayerNormTolerance)) << describe(c) << " rstd";
  EXPECT_TRUE(close_to_cpu(y_gpu, y_cpu, kLayerNormTolerance)) << describe(c) << " y";

  // Backward from the CPU's saved statistics on both sides, every subset of
  // the three gradients (none wanted included: a call that does nothing).
  const Tensor g = random_of({c.rows, c.d}, DType::f32, seed + 3);
  for (int wanted = 0; wanted < 8; ++wanted) {
    const bool want_dx = wanted & 1, want_dw = wanted & 2, want_db = wanted & 4;
    auto make = [](bool want, const Shape& shape, Device device) {
      return want ? Tensor::empty(shape, DType::f32, device) : Tensor();
    };
    Tensor dx_cpu = make(want_dx, {c.rows, c.d}, Device::cpu()), dx_gpu = make(want_dx, {c.rows, c.d}, gpu);
    Tensor dw_cpu = make(want_dw, {c.d}, Device::cpu()), dw_gpu = make(want_dw, {c.d}, gpu);
    Tensor db_cpu = make(want_db, {c.d}, Device::cpu()), db_gpu = make(want_db, {c.d}, gpu);
    CMHA_KERNEL(Device::cpu(), layer_norm.backward)(x, w, g, mean_cpu, rstd_cpu, dx_cpu, dw_cpu, db_cpu);
    CMHA_KERNEL(gpu, layer_norm.backward)(on(x, gpu), on(w, gpu), on(g, gpu), on(mean_cpu, gpu), on(rstd_cpu, gpu),
                                          dx_gpu, dw_gpu, db_gpu);
    const std::string what = describe(c) + " backward, wanted " + std::to_string(wanted);
    if (want_dx) EXPECT_TRUE(close_to_cpu(dx_gpu, dx_cpu, kLayerNormTolerance)) << what << " dx";
    if (want_dw) EXPECT_TRUE(close_to_cpu(dw_gpu, dw_cpu, kAffineTolerance)) << what << " dweight";
    if (want_db) EXPECT_TRUE(close_to_cpu(db_gpu, db_cpu, kAffineTolerance)) << what << " dbias";
  }
}

}  // namespace

PARITY_TEST(LayerNormOddSizes, "layer_norm.forward", "layer_norm.backward") {
  uint64_t seed = 10;
  for (int64_t rows : {1, 7, 33, 1003})
    for (int64_t d : {1, 7, 33, 1000, 1003, 1025, 4099}) {
      if (rows * d > 2'000'000) continue;
      expect_parity({rows, d, true, true, 1e-5f, 0.0}, seed++, gpu());
    }
}

PARITY_TEST(LayerNormWithoutWeightOrBias, "layer_norm.forward", "layer_norm.backward") {
  uint64_t seed = 100;
  for (bool weight : {false, true})
    for (bool bias : {false, true})
      for (int64_t d : {33, 2053}) expect_parity({37, d, weight, bias, 1e-5f, 0.0}, seed++, gpu());
}

PARITY_TEST(LayerNormFarFromZeroAndEpsZero, "layer_norm.forward", "layer_norm.backward") {
  // |μ| ≫ σ: a one-pass variance would cancel; eps 0 leaves rstd = 1/σ.
  uint64_t seed = 200;
  for (float eps : {0.0f, 1e-5f, 0.1f})
    for (int64_t d : {7, 1003, 1025}) expect_parity({33, d, true, true, eps, 300.0}, seed++, gpu());
}

PARITY_TEST(LayerNormManyRows, "layer_norm.forward", "layer_norm.backward") {
  // Enough rows for many dweight/dbias chunks (79 rows each at 20011 rows),
  // and a row count that is not a multiple of the chunk length.
  expect_parity({20011, 33, true, true, 1e-5f, 0.0}, 300, gpu());
  expect_parity({4099, 512, true, false, 1e-5f, 1.0}, 301, gpu());
}

PARITY_TEST(LayerNormEmpty, "layer_norm.forward", "layer_norm.backward") {
  // No rows: nothing forward; dweight and dbias are sums over no rows, 0.
  expect_parity({0, 33, true, true, 1e-5f, 0.0}, 400, gpu());
  Tensor dw = Tensor::empty({33}, DType::f32, gpu()), db = Tensor::empty({33}, DType::f32, gpu());
  const Tensor none = Tensor::empty({0, 33}, DType::f32, gpu()), stats = Tensor::empty({0}, DType::f32, gpu());
  CMHA_KERNEL(gpu(), layer_norm.backward)(none, Tensor(), none, stats, stats, Tensor(), dw, db);
  EXPECT_TRUE(same_as_cpu(dw, Tensor::zeros({33})));
  EXPECT_TRUE(same_as_cpu(db, Tensor::zeros({33})));
}
