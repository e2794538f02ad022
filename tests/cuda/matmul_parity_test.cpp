// matmul.matmul on cuda:0 (cuBLASLt) against the CPU's (oneDNN): f32 without
// TF32, bf16 inputs with f32 and bf16 outputs, the fused bias, transposed
// views, broadcast and non-mergeable batches, and the empty cases.
//
// Tolerances: both sides accumulate in f32 in different orders, so an element
// of a K-long dot product differs by about √K·2⁻²⁴ relative: for K ≤ 600
// the normalised error Σ(a-b)²/Σb² stays below 1e-11, and 1e-10 fails on any
// wrong element. A bf16 output rounds once more (2⁻⁸ relative); an f32
// difference at a rounding tie flips one bf16 ulp, so 1e-5 there.
#include "backend/kernels.h"
#include "cuda/parity.h"

using namespace cmha;
using namespace cmha::test;

namespace {

// c = a @ b (+ bias) on both devices, c of `out` dtype.
void expect_matmul_parity(const Tensor& a, const Tensor& b, const Tensor& bias, DType out, double tol,
                          const std::function<Tensor(const Tensor&)>& view_a = nullptr,
                          const std::function<Tensor(const Tensor&)>& view_b = nullptr) {
  const auto id = [](const Tensor& t) { return t; };
  const auto va = view_a ? view_a : id, vb = view_b ? view_b : id;
  const Tensor ca = va(a), cb = vb(b);
  Shape shape = ca.shape();
  shape.back() = cb.shape().back();
  for (size_t d = 0; d + 2 < shape.size(); ++d) shape[d] = std::max(ca.shape()[d], cb.shape()[d]);
  Tensor c_cpu = Tensor::empty(shape, out), c_gpu = Tensor::empty(shape, out, Device::cuda(0));
  CMHA_KERNEL(Device::cpu(), matmul.matmul)(ca, cb, bias, c_cpu);
  const Tensor ga = va(a.contiguous().to(Device::cuda(0))), gb = vb(b.contiguous().to(Device::cuda(0)));
  const Tensor gbias = bias.defined() ? bias.to(Device::cuda(0)) : Tensor();
  CMHA_KERNEL(Device::cuda(0), matmul.matmul)(ga, gb, gbias, c_gpu);
  EXPECT_TRUE(close_to_cpu(c_gpu, c_cpu, tol)) << ca.describe() << " @ " << cb.describe();
}

}  // namespace

PARITY_TEST(MatmulF32OddSizesAndBias, "matmul.matmul") {
  for (auto [m, k, n] : {std::array<int64_t, 3>{1, 1, 1}, {7, 33, 5}, {33, 1, 17}, {129, 257, 63}, {300, 600, 31}}) {
    const Tensor a = random_of({m, k}, DType::f32, 1), b = random_of({k, n}, DType::f32, 2);
    expect_matmul_parity(a, b, Tensor(), DType::f32, 1e-10);
    expect_matmul_parity(a, b, random_of({n}, DType::f32, 3), DType::f32, 1e-10);
  }
}

PARITY_TEST(MatmulTransposedViews, "matmul.matmul") {
  const Tensor a = random_of({45, 70}, DType::f32, 4), b = random_of({23, 45}, DType::f32, 5);
  const auto t = [](const Tensor& x) { return x.transpose(0, 1); };
  // aᵀ [70, 45] @ bᵀ [45, 23]: both column-major views.
  expect_matmul_parity(a, b, Tensor(), DType::f32, 1e-10, t, t);
  // a row slice with a leading stride larger than the row: [45, 30] of [45, 70].
  const Tensor w = random_of({30, 9}, DType::f32, 6);
  expect_matmul_parity(a, w, random_of({9}, DType::f32, 7), DType::f32, 1e-10,
                       [](const Tensor& x) { return x.slice(1, 20, 50); });
}

PARITY_TEST(MatmulBatchedAndBroadcast, "matmul.matmul") {
  // Attention's shapes: [B, H, T, D] @ [B, H, D, T], and a broadcast b.
  const Tensor q = random_of({3, 4, 9, 16}, DType::f32, 8), k = random_of({3, 4, 16, 11}, DType::f32, 9);
  expect_matmul_parity(q, k, Tensor(), DType::f32, 1e-10);
  const Tensor shared = random_of({1, 1, 16, 5}, DType::f32, 10);
  expect_matmul_parity(q, shared, Tensor(), DType::f32, 1e-10);
  // Heads taken out of [B, T, H, D] by a transpose: the batch dims do not merge.
  const Tensor x = random_of({3, 9, 4, 16}, DType::f32, 11), y = random_of({3, 16, 4, 7}, DType::f32, 12);
  expect_matmul_parity(x, y, Tensor(), DType::f32, 1e-10, [](const Tensor& t) { return t.transpose(1, 2); },
                       [](const Tensor& t) { return t.transpose(1, 2); });
}

PARITY_TEST(MatmulBf16, "matmul.matmul") {
  const Tensor a = random_of({65, 130}, DType::bf16, 13), b = random_of({130, 34}, DType::bf16, 14);
  expect_matmul_parity(a, b, Tensor(), DType::f32, 1e-10);
  expect_matmul_parity(a, b, random_of({34}, DType::f32, 15), DType::f32, 1e-10);
  expect_matmul_parity(a, b, Tensor(), DType::bf16, 1e-5);
  expect_matmul_parity(a, b, random_of({34}, DType::f32, 16), DType::bf16, 1e-5);
}

PARITY_TEST(MatmulEmpty, "matmul.matmul") {
  // K = 0 gives zeros (plus the bias); M = 0 or N = 0 writes nothing.
  expect_matmul_parity(Tensor::empty({5, 0}), Tensor::empty({0, 3}), Tensor(), DType::f32, 0.0);
  expect_matmul_parity(Tensor::empty({5, 0}), Tensor::empty({0, 3}), random_of({3}, DType::f32, 17), DType::f32, 0.0);
  Tensor c = Tensor::empty({0, 4}, DType::f32, Device::cuda(0));
  CMHA_KERNEL(Device::cuda(0), matmul.matmul)(Tensor::empty({0, 6}, DType::f32, Device::cuda(0)),
                                              Tensor::empty({6, 4}, DType::f32, Device::cuda(0)), Tensor(), c);
  EXPECT_EQ(c.numel(), 0);
}
