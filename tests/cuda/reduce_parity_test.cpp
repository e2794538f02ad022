// GPU parity of the reduce entries (backend/reduce.h): sum over every set of
// dims, of contiguous, permuted, sliced and broadcast views; max with ties,
// ±0, -inf and NaN; max_backward with strided and broadcast gradients;
// target_rank with ties.
//
// Tolerances. sum accumulates in double on both sides, in another order on
// the GPU (a tree, or chunks added in order): the double sums differ by
// ~1e-16 relative, so the f32 results differ by at most an ulp, rarely:
// normalised error well under 1e-12. A copy (no dim reduced), max,
// max_backward (0 + g, or dx + g, one addition each) and the integer outputs
// are exact.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "backend/kernels.h"
#include "cuda/parity.h"

using namespace cmha;
using namespace cmha::test;

namespace {

Tensor same_view(const Tensor& t) { return t; }

constexpr double kSumTolerance = 1e-12;

// The shape of x without the `reduced` dims.
Shape kept_shape(const Shape& shape, const std::vector<int64_t>& reduced) {
  Shape out;
  for (int64_t i = 0, k = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (k < static_cast<int64_t>(reduced.size()) && reduced[k] == i) ++k;
    else out.push_back(shape[i]);
  }
  return out;
}

// reduce.sum of view(base) on both devices (the view made on each side).
::testing::AssertionResult sum_matches(const Tensor& base, const View& view, const std::vector<int64_t>& reduced,
                                       Device gpu) {
  const Tensor x_cpu = view(base), x_gpu = view(base.contiguous().to(gpu));
  const Shape out_shape = kept_shape(x_cpu.shape(), reduced);
  Tensor out_cpu = Tensor::empty(out_shape), out_gpu = Tensor::empty(out_shape, DType::f32, gpu);
  CMHA_KERNEL(Device::cpu(), reduce.sum)(x_cpu, reduced, out_cpu);
  CMHA_KERNEL(gpu, reduce.sum)(x_gpu, reduced, out_gpu);
  if (reduced.empty()) return same_as_cpu(out_gpu, out_cpu);  // a copy
  return close_to_cpu(out_gpu, out_cpu, kSumTolerance);
}

// Every subset of x's dims, ascending (bit d of the mask: dim d reduced).
std::vector<std::vector<int64_t>> every_dim_set(int64_t dims) {
  std::vector<std::vector<int64_t>> sets;
  for (int64_t mask = 0; mask < (int64_t{1} << dims); ++mask) {
    std::vector<int64_t> s;
    for (int64_t d = 0; d < dims; ++d)
      if (mask & (int64_t{1} << d)) s.push_back(d);
    sets.push_back(s);
  }
  return sets;
}

std::string dims_str(const std::vector<int64_t>& dims) { return ::testing::PrintToString(dims); }

// reduce.max of view(base) along dim: values and indices exactly the CPU's.
void expect_max_matches(const Tensor& base, const View& view, int64_t dim, Device gpu) {
  const Tensor x_cpu = view(base), x_gpu = view(base.contiguous().to(gpu));
  Shape out_shape = x_cpu.shape();
  out_shape.erase(out_shape.begin() + dim);
  Tensor v_cpu = Tensor::empty(out_shape), i_cpu = Tensor::empty(out_shape, DType::i64);
  Tensor v_gpu = Tensor::empty(out_shape, DType::f32, gpu), i_gpu = Tensor::empty(out_shape, DType::i64, gpu);
  CMHA_KERNEL(Device::cpu(), reduce.max)(x_cpu, dim, v_cpu, i_cpu);
  CMHA_KERNEL(gpu, reduce.max)(x_gpu, dim, v_gpu, i_gpu);
  EXPECT_TRUE(same_as_cpu(i_gpu, i_cpu)) << x_cpu.describe() << " dim " << dim;
  EXPECT_TRUE(same_as_cpu(v_gpu, v_cpu)) << x_cpu.describe() << " dim " << dim;
}

// Values with many ties (multiples of 1/4 in [-2, 2)), and at every
// `special`-th element in turn NaN, -0, +0, -inf, +inf: the first maximum's
// index and NaN-as-largest are then what decides.
Tensor tied_values(const Shape& shape, uint64_t seed, int64_t special) {
  Tensor q = random_of(shape, DType::i64, seed, -8, 8).to(DType::f32);
  float* p = q.data<float>();
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), -0.0f, 0.0f,
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity()};
  for (int64_t i = 0; i < q.numel(); ++i) {
    p[i] *= 0.25f;
    if (special > 0 && i % special == special - 1) p[i] = specials[(i / special) % 5];
  }
  return q;
}

}  // namespace

PARITY_TEST(SumReducesEverySetOfDims, "reduce.sum") {
  // [7, 33, 5, 1003 / 9]: reduced dims first, last, in the middle, all, none.
  for (const Shape& shape : {Shape{7, 33, 5, 9}, Shape{3, 5, 1003}, Shape{1, 7, 1, 33}}) {
    const Tensor x = random_of(shape, DType::f32, 11);
    for (const auto& dims : every_dim_set(static_cast<int64_t>(shape.size())))
      EXPECT_TRUE(sum_matches(x, same_view, dims, gpu())) << shape_str(shape) << " over " << dims_str(dims);
  }
}

PARITY_TEST(SumOfOddSizes, "reduce.sum") {
  for (int64_t rows : {1, 7, 33, 1003})
    for (int64_t cols : {1, 7, 33, 1003}) {
      const Tensor x = random_of({rows, cols}, DType::f32, 100 + rows + cols);
      for (const auto& dims : every_dim_set(2))
        EXPECT_TRUE(sum_matches(x, same_view, dims, gpu())) << rows << "x" << cols << " over " << dims_str(dims);
    }
}

PARITY_TEST(SumSplitIntoChunks, "reduce.sum") {
  // Few outputs over many elements: the chunked two-pass paths (row sums,
  // column sums, everything), with a mean far from 0 so that order matters.
  const Tensor wide = random_of({5, 200003}, DType::f32, 21, 10.0, 11.0);
  EXPECT_TRUE(sum_matches(wide, same_view, {1}, gpu()));
  EXPECT_TRUE(sum_matches(wide, same_view, {0, 1}, gpu()));
  const Tensor tall = random_of({200003, 3}, DType::f32, 22, -1.0, 3.0);
  EXPECT_TRUE(sum_matches(tall, same_view, {0}, gpu()));
  EXPECT_TRUE(sum_matches(tall, same_view, {0, 1}, gpu()));
  const Tensor bias_grad = random_of({4099, 1003}, DType::f32, 23);
  EXPECT_TRUE(sum_matches(bias_grad, same_view, {0}, gpu()));
}

PARITY_TEST(SumOfStridedPermutedAndBroadcastViews, "reduce.sum") {
  const Tensor base = random_of({9, 40, 33}, DType::f32, 31);
  const View views[] = {
      [](const Tensor& t) { return t.permute({2, 0, 1}); },                    // [33, 9, 40]
      [](const Tensor& t) { return t.transpose(0, 2).slice(1, 1, 40, 3); },    // [33, 13, 9]
      [](const Tensor& t) { return t.slice(2, 0, 33, 2).permute({1, 2, 0}); },  // [40, 17, 9]
      [](const Tensor& t) { return t.select(1, 5).unsqueeze(1).expand({9, 1003, 33}); },  // broadcast middle
  };
  for (const View& view : views)
    for (const auto& dims : every_dim_set(3))
      EXPECT_TRUE(sum_matches(base, view, dims, gpu())) << view(base).describe() << " over " << dims_str(dims);
  // A broadcast reduced along its stride-0 dim, and a scalar.
  const Tensor row = random_of({1, 1003}, DType::f32, 32);
  const View tall = [](const Tensor& t) { return t.expand({4099, 1003}); };
  EXPECT_TRUE(sum_matches(row, tall, {0}, gpu()));
  EXPECT_TRUE(sum_matches(row, tall, {0, 1}, gpu()));
  EXPECT_TRUE(sum_matches(random_of({}, DType::f32, 33), same_view, {}, gpu()));
}

PARITY_TEST(SumOfEmptyTensors, "reduce.sum") {
  // Sums over no elements are 0; no outputs launch nothing.
  const Tensor x = Tensor::empty({0, 5});
  for (const auto& dims : every_dim_set(2)) EXPECT_TRUE(sum_matches(x, same_view, dims, gpu())) << dims_str(dims);
  const Tensor y = Tensor::empty({5, 0, 3});
  for (const auto& dims : every_dim_set(3)) EXPECT_TRUE(sum_matches(y, same_view, dims, gpu())) << dims_str(dims);
  // A sum over no elements is exactly 0 (not merely close).
  Tensor out = Tensor::empty({5}, DType::f32, gpu());
  CMHA_KERNEL(gpu(), reduce.sum)(Tensor::empty({0, 5}, DType::f32, gpu()), {0}, out);
  EXPECT_TRUE(same_as_cpu(out, Tensor::zeros({5})));
}

PARITY_TEST(MaxAlongEveryDim, "reduce.max") {
  // The row length decides the kernel: a warp per output from 64 along the
  // smallest stride, a thread per output otherwise.
  for (const Shape& shape : {Shape{7, 33, 65}, Shape{70, 3, 5}, Shape{1, 1003, 7}, Shape{2, 3, 4099}}) {
    const Tensor x = tied_values(shape, 41, 13);
    for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) expect_max_matches(x, same_view, dim, gpu());
  }
  for (int64_t n : {1, 7, 33, 64, 1003})
    for (int64_t rows : {1, 7, 1003}) {
      const Tensor x = tied_values({rows, n}, 42 + n, 0);
      expect_max_matches(x, same_view, 0, gpu());
      expect_max_matches(x, same_view, 1, gpu());
    }
}

PARITY_TEST(MaxWithNaNAndTies, "reduce.max") {
  // Rows all equal, all NaN, NaN after the maximum, -0 before +0, only -inf.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const int64_t n = 100;
  std::vector<float> v(6 * n, 1.5f);
  for (int64_t j = 0; j < n; ++j) {
    v[1 * n + j] = nan;
    v[2 * n + j] = j == 70 ? 9.0f : (j == 80 || j == 90 ? nan : 0.0f);
    v[3 * n + j] = j < 50 ? -0.0f : 0.0f;
    v[4 * n + j] = -inf;
    v[5 * n + j] = j == 99 ? 2.0f : 1.0f;
  }
  const Tensor x = Tensor::from_vector(v, {6, n});
  expect_max_matches(x, same_view, 1, gpu());
  expect_max_matches(x, [](const Tensor& t) { return t.transpose(0, 1); }, 0, gpu());
  expect_max_matches(x.slice(1, 0, 7).contiguous(), same_view, 1, gpu());
}

PARITY_TEST(MaxOfStridedViews, "reduce.max") {
  const Tensor base = tied_values({9, 130, 33}, 51, 17);
  const View views[] = {
      [](const Tensor& t) { return t.permute({2, 0, 1}); },                // [33, 9, 130], dim 2 of stride 33
      [](const Tensor& t) { return t.transpose(1, 2); },                   // [9, 33, 130]
      [](const Tensor& t) { return t.slice(1, 1, 130, 2).permute({1, 0, 2}); },  // [65, 9, 33]
      [](const Tensor& t) { return t.select(1, 3).unsqueeze(1).expand({9, 100, 33}); },  // broadcast
  };
  for (const View& view : views)
    for (int64_t dim = 0; dim < 3; ++dim) expect_max_matches(base, view, dim, gpu());
  // No outputs: nothing to do.
  expect_max_matches(Tensor::empty({0, 5}), same_view, 1, gpu());
}

PARITY_TEST(MaxBackwardRoutesEachGradient, "reduce.max_backward") {
  for (const Shape& shape : {Shape{7, 33, 5}, Shape{1003, 7}, Shape{1, 4099}, Shape{3, 0, 2}}) {
    const Tensor x = tied_values(shape, 61, 11);
    const int64_t dims = static_cast<int64_t>(shape.size());
    for (int64_t dim = 0; dim < dims; ++dim) {
      if (shape[dim] == 0) continue;  // max needs a non-empty dim
      Shape kd = shape;
      kd[dim] = 1;
      Shape squeezed = shape;
      squeezed.erase(squeezed.begin() + dim);
      Tensor values = Tensor::empty(squeezed), indices = Tensor::empty(squeezed, DType::i64);
      CMHA_KERNEL(Device::cpu(), reduce.max)(x, dim, values, indices);
      const Tensor idx = indices.unsqueeze(dim);  // [.., 1, ..]
      // g contiguous, g a transposed view, g broadcast from one value; dx
      // zero-filled, and dx holding values already (the entry adds).
      const Tensor g_base = random_of(kd, DType::f32, 62 + dim);
      Shape reversed(kd.rbegin(), kd.rend());
      std::vector<int64_t> flip(dims);
      for (int64_t d = 0; d < dims; ++d) flip[d] = dims - 1 - d;
      const Tensor g_t = random_of(reversed, DType::f32, 63 + dim);
      const Tensor g_one = random_of({1}, DType::f32, 64 + dim);
      struct Case {
        Tensor base;
        View view;
      };
      const Case cases[] = {
          {g_base, same_view},
          {g_t, [flip](const Tensor& t) { return t.permute(flip); }},
          {g_one, [kd](const Tensor& t) { return t.view(Shape(kd.size(), 1)).expand(kd); }},
      };
      for (const Case& c : cases)
        for (bool zero : {true, false}) {
          const Tensor dx0 = zero ? Tensor::zeros(shape) : random_of(shape, DType::f32, 65);
          Tensor dx_cpu = dx0.clone(), dx_gpu = on_gpu(dx0);
          CMHA_KERNEL(Device::cpu(), reduce.max_backward)(c.view(c.base), idx, dim, dx_cpu);
          CMHA_KERNEL(gpu(), reduce.max_backward)(c.view(on_gpu(c.base)), on_gpu(idx), dim, dx_gpu);
          EXPECT_TRUE(same_as_cpu(dx_gpu, dx_cpu)) << shape_str(shape) << " dim " << dim;
        }
    }
  }
}

PARITY_TEST(TargetRankCountsStrictlyHigherScores, "reduce.target_rank") {
  for (int64_t rows : {0, 1, 7, 33, 1003})
    for (int64_t classes : {1, 7, 33, 1000, 1003}) {
      // Quantised scores: many ties with the target, which do not count.
      const Tensor z = tied_values({rows, classes}, 71 + classes, 0);
      const Tensor target = random_of({rows}, DType::i64, 72 + rows, 0, static_cast<double>(classes));
      Tensor r_cpu = Tensor::empty({rows}, DType::i64), r_gpu = Tensor::empty({rows}, DType::i64, gpu());
      CMHA_KERNEL(Device::cpu(), reduce.target_rank)(z, target, r_cpu);
      CMHA_KERNEL(gpu(), reduce.target_rank)(on_gpu(z), on_gpu(target), r_gpu);
      EXPECT_TRUE(same_as_cpu(r_gpu, r_cpu)) << rows << "x" << classes;
    }
}
