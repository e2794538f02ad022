// The dropout, loss, embedding, index and matmul entries of the CPU kernel
// table, called directly: every entry is set, and each computes what its op
// computes (the ops are only checks, allocation and these calls).
#include <gtest/gtest.h>

#include <cstring>

#include "autograd/accuracy.h"
#include "autograd/ops.h"
#include "backend/kernels.h"
#include "support/check.h"

using namespace cmha;
using namespace cmha::test;

namespace {

const backend::KernelTable& cpu_table() { return backend::kernel_table(Device::cpu()); }

using cmha::test::same_bytes;

}  // namespace

TEST(KernelEntries, CpuTableFillsEveryEntryOfTheseFamilies) {
  const backend::KernelTable& t = cpu_table();
  EXPECT_NE(t.dropout.forward, nullptr);
  EXPECT_NE(t.dropout.backward, nullptr);
  EXPECT_NE(t.loss.count_targets, nullptr);
  EXPECT_NE(t.loss.cross_entropy_forward, nullptr);
  EXPECT_NE(t.loss.cross_entropy_backward, nullptr);
  EXPECT_NE(t.loss.soft_cross_entropy_forward, nullptr);
  EXPECT_NE(t.loss.soft_cross_entropy_backward, nullptr);
  EXPECT_NE(t.loss.reduce_rows, nullptr);
  EXPECT_NE(t.embedding.forward, nullptr);
  EXPECT_NE(t.embedding.backward, nullptr);
  EXPECT_NE(t.index.find_out_of_range, nullptr);
  EXPECT_NE(t.index.masked_fill, nullptr);
  EXPECT_NE(t.index.gather, nullptr);
  EXPECT_NE(t.index.gather_backward, nullptr);
  EXPECT_NE(t.matmul.matmul, nullptr);
}

TEST(KernelEntries, MatmulEntryIsTheOpWithAFusedBias) {
  Tensor a = random_tensor({2, 5, 7}, 1), b = random_tensor({2, 7, 3}, 2), bias = random_tensor({3}, 3);
  Tensor c = Tensor::empty({2, 5, 3});
  CMHA_KERNEL(Device::cpu(), matmul.matmul)(a, b, Tensor(), c);
  EXPECT_TRUE(same_bytes(c, matmul(a, b)));
  // A transposed view goes in as it is; the bias is added to every row.
  Tensor w = random_tensor({3, 7}, 4), x = random_tensor({5, 7}, 5);
  Tensor y = Tensor::empty({5, 3});
  CMHA_KERNEL(Device::cpu(), matmul.matmul)(x, w.transpose(0, 1), bias, y);
  EXPECT_TRUE(same_bytes(y, linear(x, w, bias)));
}

TEST(KernelEntries, DropoutForwardWritesTheOpsMaskAndOutput) {
  const int64_t n = 1000;  // three whole groups of 256 and a tail of 232
  Tensor x = random_tensor({n}, 6, 0.5f, 1.5f);
  Generator gen(42);
  Tensor y_op = dropout(x, 0.25f, true, gen);
  Tensor y = Tensor::empty({n}), mask = Tensor::empty({n}, DType::b8);
  CMHA_KERNEL(Device::cpu(), dropout.forward)(x, y, mask, 0, Generator(42).key(), 0.25f, 1.0f / 0.75f);
  EXPECT_TRUE(same_bytes(y, y_op));
  const bool* m = mask.data<bool>();
  const std::vector<float> yv = y.to_float_vector();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(m[i], yv[i] != 0.0f) << i;
  Tensor g = random_tensor({n}, 7), dx = Tensor::empty({n});
  CMHA_KERNEL(Device::cpu(), dropout.backward)(g, mask, dx, 2.0f);
  const std::vector<float> gv = g.to_float_vector(), dv = dx.to_float_vector();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(dv[i], m[i] ? gv[i] * 2.0f : 0.0f) << i;
}

// The checks write their answers into tensors (on a GPU: device memory the host reads later).
backend::OutOfRange out_of_range_on_cpu(const Tensor& idx, int64_t limit) {
  Tensor found = Tensor::full({2}, 7.0, DType::i64);  // overwritten
  CMHA_KERNEL(Device::cpu(), index.find_out_of_range)(idx, limit, found);
  return backend::out_of_range_of(found.data<int64_t>());
}
backend::TargetCount targets_on_cpu(const Tensor& target, int64_t classes) {
  Tensor found = Tensor::full({3}, 7.0, DType::i64);
  CMHA_KERNEL(Device::cpu(), loss.count_targets)(target, classes, -100, found);
  return backend::target_count_of(found.data<int64_t>());
}

TEST(KernelEntries, RangeChecksReportTheFirstBadElement) {
  Tensor idx = Tensor::from_vector_i64({0, 4, 5, -1, 9}, {5});
  backend::OutOfRange r = out_of_range_on_cpu(idx, 5);
  EXPECT_EQ(r.position, 2);
  EXPECT_EQ(r.value, 5);
  EXPECT_EQ(out_of_range_on_cpu(idx.slice(0, 0, 2).contiguous(), 5).position, -1);
  EXPECT_EQ(out_of_range_on_cpu(Tensor::empty({0}, DType::i64), 5).position, -1);

  Tensor target = Tensor::from_vector_i64({1, -100, 2, 7, 3}, {5});
  backend::TargetCount c = targets_on_cpu(target, 4);
  EXPECT_EQ(c.bad_row, 3);
  EXPECT_EQ(c.bad_value, 7);
  c = targets_on_cpu(target, 8);
  EXPECT_EQ(c.bad_row, -1);
  EXPECT_EQ(c.count, 4);
}

TEST(KernelEntries, CorrectPredictionsAreCountedIntoATensor) {
  Tensor pred = Tensor::from_vector_i64({1, 2, 3, 0, 5}, {5});
  Tensor target = Tensor::from_vector_i64({1, 2, 0, 0, 5}, {5});
  EXPECT_EQ(*count_correct(pred, target, -100).data<int64_t>(), 4);
  EXPECT_EQ(*count_correct(pred, target, 0).data<int64_t>(), 3);  // the rows whose target is 0 are ignored
  EXPECT_EQ(count_correct(pred, target, 0).dim(), 0);
}

TEST(KernelEntries, ReduceRowsSumsInF64AndAMeanOverNoRowsIsZero) {
  Tensor rows = Tensor::from_vector({1.0f, 2.0f, 4.5f}, {3}), out = Tensor::empty({});
  CMHA_KERNEL(Device::cpu(), loss.reduce_rows)(rows, out, 1.0);
  EXPECT_EQ(out.item(), 7.5f);
  CMHA_KERNEL(Device::cpu(), loss.reduce_rows)(rows, out, 3.0);
  EXPECT_EQ(out.item(), 2.5f);
  CMHA_KERNEL(Device::cpu(), loss.reduce_rows)(Tensor::empty({0}), out, 0.0);
  EXPECT_EQ(out.item(), 0.0f);
}

TEST(KernelEntries, EmbeddingBackwardAddsIntoTheGivenRows) {
  Tensor ids = Tensor::from_vector_i64({2, 0, 2}, {3});
  Tensor g = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor grad_w = Tensor::full({3, 2}, 1.0);
  CMHA_KERNEL(Device::cpu(), embedding.backward)(g, ids, grad_w);
  EXPECT_EQ(grad_w.to_float_vector(), (std::vector<float>{4, 5, 1, 1, 7, 9}));
}
