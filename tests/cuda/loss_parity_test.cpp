// GPU parity of the loss entries (backend/loss.h): count_targets (ignored
// rows, the first bad row), the label-smoothed cross-entropy and the
// soft-target cross-entropy forward and backward (ignored rows, eps 0 and
// 0.1, per_row true and false, denominators, vocabulary-sized C, logits of
// |z| ~ 500), and reduce_rows.
//
// Tolerances.
// - max: exact (a maximum does not depend on the order).
// - the backwards: from the same max and log_sum, an exp an ulp or two
//   apart: a few ulp per element, normalised error ~1e-13 at most: 1e-12.
// - log_sum: f32 sums of exp in another order. At |z| ~ 500 over 7 classes
//   most rows are one term of 1 and terms below an ulp, whose sum in another
//   order can round an ulp of 1 apart (1.2e-7 on a log_sum near 0): 1e-11.
// - row_loss: also holds the f32 Σ (z - m) (a mean over C), which at
//   |z| ~ 500 and C = 8003 sums to ~4e6 with rounding errors of ~10 in any
//   order: ε·10/C ≈ 1e-4 on a loss of ~500, 2e-7 relative: 1e-11.
// - reduce_rows: double sums in another order, then one f32 rounding: 1e-12.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/kernels.h"
#include "cuda/parity.h"

using namespace cmha;
using namespace cmha::test;

namespace {

constexpr double kCrossEntropyTolerance = 1e-12;
constexpr double kLossTolerance = 1e-11;
constexpr int64_t kIgnore = -100;

// Targets in [0, C), with every `ignored`-th row ignore_index (none for 0).
Tensor targets(int64_t rows, int64_t classes, uint64_t seed, int64_t ignored, int64_t ignore_index = kIgnore) {
  std::vector<int64_t> t = random_of({rows}, DType::i64, seed, 0, static_cast<double>(classes)).to_i64_vector();
  for (int64_t i = 0; i < rows; ++i)
    if (ignored > 0 && i % ignored == ignored - 1) t[i] = ignore_index;
  return Tensor::from_vector_i64(t, {rows});
}

backend::TargetCount count_on(Device device, const Tensor& target, int64_t classes, int64_t ignore_index) {
  Tensor found = Tensor::full({3}, 12345.0, DType::i64, device);  // written by the kernel, read here
  CMHA_KERNEL(device, loss.count_targets)(target.to(device), classes, ignore_index, found);
  return backend::target_count_of(found.to(Device::cpu()).data<int64_t>());
}

void expect_count_matches(const std::vector<int64_t>& values, int64_t classes, int64_t ignore_index, Device gpu) {
  const Tensor t = Tensor::from_vector_i64(values, {static_cast<int64_t>(values.size())});
  const backend::TargetCount c = count_on(Device::cpu(), t, classes, ignore_index);
  const backend::TargetCount g = count_on(gpu, t, classes, ignore_index);
  EXPECT_EQ(g.count, c.count) << values.size() << " rows";
  EXPECT_EQ(g.bad_row, c.bad_row) << values.size() << " rows";
  EXPECT_EQ(g.bad_value, c.bad_value) << values.size() << " rows";
}

struct LossCase {
  int64_t rows, classes;
  float eps;
  double scale;  // logits uniform in [-scale, scale)
};

std::string describe(const LossCase& c) {
  return "[" + std::to_string(c.rows) + ", " + std::to_string(c.classes) + "] eps " + std::to_string(c.eps) +
         " |z| < " + std::to_string(c.scale);
}

// The upstream gradient: [N] when per_row, else one element.
Tensor upstream(int64_t rows, bool per_row, uint64_t seed) {
  return random_of({per_row ? rows : 1}, DType::f32, seed, 0.5, 2.0);
}

void expect_cross_entropy_parity(const LossCase& c, const Tensor& target, int64_t ignore_index, uint64_t seed,
                                 Device gpu) {
  const int64_t N = c.rows, C = c.classes;
  const Tensor z = random_of({N, C}, DType::f32, seed, -c.scale, c.scale);
  Tensor loss_cpu = Tensor::empty({N}), max_cpu = Tensor::empty({N}), ls_cpu = Tensor::empty({N});
  Tensor loss_gpu = Tensor::empty({N}, DType::f32, gpu), max_gpu = Tensor::empty({N}, DType::f32, gpu),
         ls_gpu = Tensor::empty({N}, DType::f32, gpu);
  CMHA_KERNEL(Device::cpu(), loss.cross_entropy_forward)(z, target, loss_cpu, max_cpu, ls_cpu, c.eps, ignore_index);
  const Tensor zg = z.to(gpu), tg = target.to(gpu);
  CMHA_KERNEL(gpu, loss.cross_entropy_forward)(zg, tg, loss_gpu, max_gpu, ls_gpu, c.eps, ignore_index);
  EXPECT_TRUE(same_as_cpu(max_gpu, max_cpu)) << describe(c) << " max";
  EXPECT_TRUE(close_to_cpu(ls_gpu, ls_cpu, kLossTolerance)) << describe(c) << " log_sum";
  EXPECT_TRUE(close_to_cpu(loss_gpu, loss_cpu, kLossTolerance)) << describe(c) << " row_loss";

  // Backward from the CPU's saved max and log_sum on both sides.
  const backend::TargetCount counted = count_on(Device::cpu(), target, C, ignore_index);
  for (bool per_row : {true, false}) {
    const Tensor g = upstream(N, per_row, seed + 1);
    for (float denom : {1.0f, static_cast<float>(counted.count > 0 ? counted.count : 1)}) {
      Tensor dz_cpu = Tensor::empty({N, C}), dz_gpu = Tensor::empty({N, C}, DType::f32, gpu);
      CMHA_KERNEL(Device::cpu(), loss.cross_entropy_backward)(z, target, max_cpu, ls_cpu, g, dz_cpu, c.eps,
                                                              ignore_index, per_row, denom);
      CMHA_KERNEL(gpu, loss.cross_entropy_backward)(zg, tg, max_cpu.to(gpu), ls_cpu.to(gpu), g.to(gpu), dz_gpu,
                                                    c.eps, ignore_index, per_row, denom);
      EXPECT_TRUE(close_to_cpu(dz_gpu, dz_cpu, kCrossEntropyTolerance))
          << describe(c) << " dz, per_row " << per_row << " denom " << denom;
    }
  }
}

void expect_soft_cross_entropy_parity(const LossCase& c, uint64_t seed, Device gpu) {
  const int64_t N = c.rows, C = c.classes;
  const Tensor z = random_of({N, C}, DType::f32, seed, -c.scale, c.scale);
  // Non-negative targets that do not sum to 1 (S ≠ 1 exercises the general form).
  const Tensor q = random_of({N, C}, DType::f32, seed + 1, 0.0, 2.0 / static_cast<double>(C));
  Tensor loss_cpu = Tensor::empty({N}), max_cpu = Tensor::empty({N}), ls_cpu = Tensor::empty({N});
  Tensor loss_gpu = Tensor::empty({N}, DType::f32, gpu), max_gpu = Tensor::empty({N}, DType::f32, gpu),
         ls_gpu = Tensor::empty({N}, DType::f32, gpu);
  CMHA_KERNEL(Device::cpu(), loss.soft_cross_entropy_forward)(z, q, loss_cpu, max_cpu, ls_cpu, c.eps);
  const Tensor zg = z.to(gpu), qg = q.to(gpu);
  CMHA_KERNEL(gpu, loss.soft_cross_entropy_forward)(zg, qg, loss_gpu, max_gpu, ls_gpu, c.eps);
  EXPECT_TRUE(same_as_cpu(max_gpu, max_cpu)) << describe(c) << " max";
  EXPECT_TRUE(close_to_cpu(ls_gpu, ls_cpu, kLossTolerance)) << describe(c) << " log_sum";
  EXPECT_TRUE(close_to_cpu(loss_gpu, loss_cpu, kLossTolerance)) << describe(c) << " row_loss";

  for (bool per_row : {true, false}) {
    const Tensor g = upstream(N, per_row, seed + 2);
    for (float denom : {1.0f, static_cast<float>(N > 0 ? N : 1)}) {
      Tensor dz_cpu = Tensor::empty({N, C}), dq_cpu = Tensor::empty({N, C});
      Tensor dz_gpu = Tensor::empty({N, C}, DType::f32, gpu), dq_gpu = Tensor::empty({N, C}, DType::f32, gpu);
      CMHA_KERNEL(Device::cpu(), loss.soft_cross_entropy_backward)(z, q, max_cpu, ls_cpu, g, dz_cpu, dq_cpu, c.eps,
                                                                   per_row, denom);
      CMHA_KERNEL(gpu, loss.soft_cross_entropy_backward)(zg, qg, max_cpu.to(gpu), ls_cpu.to(gpu), g.to(gpu), dz_gpu,
                                                         dq_gpu, c.eps, per_row, denom);
      const std::string what = describe(c) + ", per_row " + std::to_string(per_row) + " denom " + std::to_string(denom);
      EXPECT_TRUE(close_to_cpu(dz_gpu, dz_cpu, kCrossEntropyTolerance)) << what << " dz";
      EXPECT_TRUE(close_to_cpu(dq_gpu, dq_cpu, kCrossEntropyTolerance)) << what << " dq";
    }
  }
}

// Sizes: rows of 1, 7, 33, 1003 and classes from 1 to a vocabulary (a warp
// per row up to 1024 classes, a block beyond).
const LossCase kLossCases[] = {
    {1, 1, 0.0f, 1.0},      {7, 7, 0.1f, 3.0},      {33, 1000, 0.0f, 3.0},   {33, 1000, 0.1f, 3.0},
    {1003, 33, 0.1f, 3.0},  {40, 8003, 0.0f, 3.0},  {40, 8003, 0.1f, 3.0},   {3, 40009, 0.1f, 3.0},
    {33, 1003, 0.1f, 500.0}, {40, 8003, 0.1f, 500.0}, {1003, 7, 0.0f, 500.0}, {0, 7, 0.1f, 1.0},
};

}  // namespace

PARITY_TEST(CountTargetsScansInRowOrder, "loss.count_targets") {
  expect_count_matches({}, 5, kIgnore, gpu());
  expect_count_matches({3}, 5, kIgnore, gpu());
  expect_count_matches({kIgnore}, 5, kIgnore, gpu());
  expect_count_matches({0, 4, kIgnore, 2, 1, kIgnore, 3}, 5, kIgnore, gpu());
  expect_count_matches({0, 4, 5, 2, -1, 7}, 5, kIgnore, gpu());       // first bad: row 2 (5)
  expect_count_matches({-1, 0}, 5, kIgnore, gpu());                   // negative, and row 0
  expect_count_matches({0, 1, 2, 0}, 5, 0, gpu());                    // ignore_index a class
  for (int64_t rows : {33, 1003, 100003}) {
    std::vector<int64_t> t = targets(rows, 1000, rows, 3).to_i64_vector();
    expect_count_matches(t, 1000, kIgnore, gpu());  // none bad
    // Bad rows late, and one earlier (in another thread's stride) that must win.
    t[rows - 1] = 1000;
    expect_count_matches(t, 1000, kIgnore, gpu());
    t[rows / 2 + 1] = -7;
    expect_count_matches(t, 1000, kIgnore, gpu());
    t[1] = 2000;
    expect_count_matches(t, 1000, kIgnore, gpu());
  }
}

PARITY_TEST(CountCorrectCountsLikeTheCpu, "loss.count_correct") {
  for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{70001}}) {
    std::vector<int64_t> pred(static_cast<size_t>(n)), target(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      pred[static_cast<size_t>(i)] = (i * 7) % 5;
      target[static_cast<size_t>(i)] = i % 11 == 3 ? 1 : (i * 3) % 5;  // 1: ignored below
    }
    const Tensor p = Tensor::from_vector_i64(pred, {n}), t = Tensor::from_vector_i64(target, {n});
    const auto count_on = [&](Device d) {
      Tensor out = Tensor::full({}, 12345.0, DType::i64, d);
      CMHA_KERNEL(d, loss.count_correct)(p.to(d), t.to(d), 1, out);
      return *out.to(Device::cpu()).data<int64_t>();
    };
    EXPECT_EQ(count_on(gpu()), count_on(Device::cpu())) << "n = " << n;
  }
}

PARITY_TEST(CrossEntropyForwardBackward, "loss.cross_entropy_forward", "loss.cross_entropy_backward") {
  uint64_t seed = 10;
  for (const LossCase& c : kLossCases) {
    // Every 5th row ignored; a second pass with no row ignored.
    expect_cross_entropy_parity(c, targets(c.rows, c.classes, seed, 5), kIgnore, seed + 1, gpu());
    expect_cross_entropy_parity(c, targets(c.rows, c.classes, seed + 2, 0), kIgnore, seed + 3, gpu());
    seed += 10;
  }
  // ignore_index a class (0): rows targeting class 0 are ignored.
  const LossCase c{33, 1003, 0.1f, 3.0};
  expect_cross_entropy_parity(c, targets(c.rows, c.classes, 500, 4, 0), 0, 501, gpu());
  // Every row ignored: all zeros, forward and backward.
  expect_cross_entropy_parity(c, targets(c.rows, c.classes, 502, 1), kIgnore, 503, gpu());
}

PARITY_TEST(SoftCrossEntropyForwardBackward, "loss.soft_cross_entropy_forward",
            "loss.soft_cross_entropy_backward") {
  uint64_t seed = 1000;
  for (const LossCase& c : kLossCases) {
    expect_soft_cross_entropy_parity(c, seed, gpu());
    seed += 10;
  }
}

PARITY_TEST(ReduceRowsSumsInDouble, "loss.reduce_rows") {
  for (int64_t rows : {0, 1, 7, 1003, 100003})
    for (double divisor : {0.0, 1.0, 7.0, 1003.0}) {
      // Losses of one sign and mixed magnitudes, as per-row losses are.
      const Tensor row_loss = random_of({rows}, DType::f32, 2000 + rows, 0.0, 10.0);
      Tensor out_cpu = Tensor::empty({}), out_gpu = Tensor::empty({}, DType::f32, gpu());
      CMHA_KERNEL(Device::cpu(), loss.reduce_rows)(row_loss, out_cpu, divisor);
      CMHA_KERNEL(gpu(), loss.reduce_rows)(on_gpu(row_loss), out_gpu, divisor);
      if (rows == 0 || divisor == 0.0) EXPECT_TRUE(same_as_cpu(out_gpu, out_cpu)) << rows << " / " << divisor;
      else EXPECT_TRUE(close_to_cpu(out_gpu, out_cpu, kCrossEntropyTolerance)) << rows << " / " << divisor;
    }
}
