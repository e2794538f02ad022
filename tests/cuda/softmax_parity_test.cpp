// GPU parity of the softmax entries (backend/softmax.h): softmax and
// log_softmax over the middle dim of [outer, n, inner], forward and backward,
// for rows (inner == 1: a warp per row up to 1024, a block beyond) and
// columns (inner > 1: a thread per line when there are many lines, a group
// per line when few), odd sizes, large logits, NaN and -inf.
//
// Tolerance. Both sides sum in f32 (the GPU in a tree, the CPU in vector
// lanes) and their exp differ by an ulp or two (expf vs cpu::vec::exp, each
// within 2 ulp): every output is within a few ulp relatively (~2.4e-7 for
// 4 ulp), so the normalised error is under (2.4e-7)² ≈ 6e-14, and 1e-12
// leaves a margin while catching any formula slip (which gives ~1e-6 or more).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backend/kernels.h"
#include "cuda/parity.h"

using namespace cmha;
using namespace cmha::test;

namespace {

constexpr double kSoftmaxTolerance = 1e-12;

using Geometry = backend::SoftmaxGeometry;

std::string describe(const Geometry& s, bool log) {
  return std::string(log ? "log_softmax" : "softmax") + " [" + std::to_string(s.outer) + ", " +
         std::to_string(s.n) + ", " + std::to_string(s.inner) + "]";
}

// Forward on both devices from the same x; the CPU's y is returned for the backward.
Tensor expect_forward_matches(const Tensor& x, const Geometry& s, bool log, Device gpu) {
  Tensor y_cpu = Tensor::empty(x.shape()), y_gpu = Tensor::empty(x.shape(), DType::f32, gpu);
  CMHA_KERNEL(Device::cpu(), softmax.forward)(x, y_cpu, s, log);
  CMHA_KERNEL(gpu, softmax.forward)(x.to(gpu), y_gpu, s, log);
  EXPECT_TRUE(close_to_cpu(y_gpu, y_cpu, kSoftmaxTolerance)) << describe(s, log);
  return y_cpu;
}

// Backward on both devices from the same y (the CPU forward's) and g.
void expect_backward_matches(const Tensor& y, const Tensor& g, const Geometry& s, bool log, Device gpu) {
  Tensor dx_cpu = Tensor::empty(y.shape()), dx_gpu = Tensor::empty(y.shape(), DType::f32, gpu);
  CMHA_KERNEL(Device::cpu(), softmax.backward)(y, g, dx_cpu, s, log);
  CMHA_KERNEL(gpu, softmax.backward)(y.to(gpu), g.to(gpu), dx_gpu, s, log);
  EXPECT_TRUE(close_to_cpu(dx_gpu, dx_cpu, kSoftmaxTolerance)) << describe(s, log) << " backward";
}

void expect_parity(const Geometry& s, uint64_t seed, double scale, Device gpu, bool backward = true) {
  const Tensor x = random_of({s.outer, s.n, s.inner}, DType::f32, seed, -scale, scale);
  const Tensor g = random_of({s.outer, s.n, s.inner}, DType::f32, seed + 1);
  for (bool log : {false, true}) {
    const Tensor y = expect_forward_matches(x, s, log, gpu);
    if (backward) expect_backward_matches(y, g, s, log, gpu);
  }
}

}  // namespace

PARITY_TEST(SoftmaxRows, "softmax.forward", "softmax.backward") {
  // Rows of 1, 7, 33, 1000 and 1003 (a warp each), 1025 and 8003 (a block each).
  for (int64_t rows : {1, 7, 33, 1003})
    for (int64_t n : {1, 7, 33, 1000, 1003, 1025, 8003}) {
      if (rows * n > 4'000'000) continue;
      expect_parity({rows, n, 1}, 10 + rows + n, 3.0, gpu());
    }
}

PARITY_TEST(SoftmaxRowsOfLargeLogits, "softmax.forward", "softmax.backward") {
  // |z| ~ 500: the max subtraction is what keeps exp finite.
  for (int64_t n : {1003, 8003}) expect_parity({33, n, 1}, 20 + n, 500.0, gpu());
  // Seven logits that far apart: one probability is 1 up to ~e^-140 in most
  // rows. The forward still matches; the softmax backward there is
  // y·(g - Σ g·y) with Σ g·y ≈ g: a difference of an ulp of g, which a
  // normalised error cannot bound (it is all there is of dx), so only the
  // forward is compared.
  expect_parity({33, 7, 1}, 27, 500.0, gpu(), /*backward=*/false);
}

PARITY_TEST(SoftmaxColumns, "softmax.forward", "softmax.backward") {
  // Many lines (a thread each: outer·inner ≥ 4096) and few (a group each,
  // a warp up to n = 1024, a block beyond).
  const Geometry shapes[] = {{7, 33, 1003}, {3, 5, 4099}, {1, 1003, 4099}, {1, 7, 2},
                             {33, 1, 7},    {2, 1003, 3}, {1, 8003, 5},    {5, 33, 1000}};
  uint64_t seed = 30;
  for (const Geometry& s : shapes) expect_parity(s, seed++, 3.0, gpu());
  expect_parity({4, 1003, 7}, seed++, 500.0, gpu());
}

PARITY_TEST(SoftmaxNaNAndInfinities, "softmax.forward", "softmax.backward") {
  // A NaN makes its row NaN; a row of -inf is NaN (−inf − −inf); an +inf
  // makes its row NaN; a -inf among numbers is a 0 (log: -inf).
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (int64_t n : {5, 1003, 2000}) {
    std::vector<float> v = random_of({5, n}, DType::f32, 40 + n).to_float_vector();
    v[0 * n + n / 2] = nan;
    for (int64_t j = 0; j < n; ++j) v[1 * n + j] = -inf;
    v[2 * n + n - 1] = inf;
    v[3 * n + 1] = -inf;
    const Tensor x = Tensor::from_vector(v, {5, n});
    for (bool log : {false, true}) {
      expect_forward_matches(x, {5, n, 1}, log, gpu());
      // The same as columns: [1, n, 5].
      expect_forward_matches(x.transpose(0, 1).contiguous(), {1, n, 5}, log, gpu());
    }
  }
}

PARITY_TEST(SoftmaxEmpty, "softmax.forward", "softmax.backward") {
  // No rows, or rows of no elements: nothing to compute, no launch.
  for (const Geometry& s : {Geometry{0, 7, 1}, Geometry{7, 0, 1}, Geometry{3, 5, 0}, Geometry{0, 5, 3}})
    expect_parity(s, 50, 1.0, gpu());
}
