// GPU parity of the elementwise family: binary arithmetic with NumPy
// broadcasting over strided, sliced and expanded views, and every UnaryOp.
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "autograd/ops.h"
#include "backend/kernels.h"
#include "cuda/parity.h"
#include "cuda/same_bits.h"

using namespace cmha;
using namespace cmha::test;
using backend::BinaryOp;
using backend::UnaryOp;

namespace {

const BinaryOp kBinaryOps[] = {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div};

// op over the same views of the same bases on both devices; add, sub, mul
// and div are IEEE operations on both, so the bits must agree (NaN aside).
::testing::AssertionResult binary_matches(BinaryOp op, const Tensor& a_base, const Tensor& b_base, const View& va,
                                          const View& vb) {
  const Tensor a = va(a_base), b = vb(b_base);
  const Tensor ga = va(gpu_copy(a_base)), gb = vb(gpu_copy(b_base));
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "binary parity");
  Tensor out = Tensor::empty(shape), gout = Tensor::empty(shape, DType::f32, Device::cuda(0));
  CMHA_KERNEL(Device::cpu(), elementwise.binary)(op, a, b, out);
  CMHA_KERNEL(Device::cuda(0), elementwise.binary)(op, ga, gb, gout);
  return same_bits_but_nan_payload(gout, out);
}

// Values away from 0 so that div stays finite (NaN and ±inf are their own test).
Tensor operand(const Shape& shape, uint64_t seed) {
  Tensor t = random_of(shape, DType::f32, seed, 0.5, 2.0);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); i += 3) p[i] = -p[i];
  return t;
}

Tensor unary_on(Device device, UnaryOp op, const Tensor& x, float s) {
  const Tensor in = device.is_cpu() ? x : gpu_copy(x);
  Tensor out = Tensor::empty(x.shape(), DType::f32, device);
  CMHA_KERNEL(device, elementwise.unary)(op, in, out, s);
  return out;
}

// Values of x in [low, high) of every odd size, followed by the special values.
Tensor unary_input(int64_t n, uint64_t seed, double low, double high) {
  Tensor t = random_of({n}, DType::f32, seed, low, high);
  const float specials[] = {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, 1e-40f, -3.5f, 1e30f};
  for (int64_t i = 0; i < n && i < 10; ++i) t.data<float>()[n - 1 - i] = specials[i];
  return t;
}

}  // namespace

PARITY_TEST(BinaryContiguousOddSizes, "elementwise.binary") {
  for (int64_t n : {0, 1, 7, 33, 1003})
    for (BinaryOp op : kBinaryOps)
      EXPECT_TRUE(binary_matches(op, operand({n}, 1 + n), operand({n}, 2 + n), kWhole, kWhole))
          << "n = " << n << ", op " << static_cast<int>(op);
}

PARITY_TEST(BinaryBroadcasts, "elementwise.binary") {
  struct Case {
    Shape a, b;
  };
  const Case cases[] = {
      {{7, 33}, {33}},      {{7, 1}, {1, 33}},   {{}, {5, 7}},        {{5, 7}, {}},   {{3, 1, 5}, {4, 1}},
      {{2, 3, 4, 5}, {3, 1, 5}}, {{1}, {1003}},  {{0, 5}, {5}},       {{3, 0}, {1}},  {{4, 1, 6}, {1, 0, 6}},
  };
  for (const Case& c : cases)
    for (BinaryOp op : kBinaryOps)
      EXPECT_TRUE(binary_matches(op, operand(c.a, 11), operand(c.b, 12), kWhole, kWhole))
          << shape_str(c.a) << " with " << shape_str(c.b) << ", op " << static_cast<int>(op);
}

PARITY_TEST(BinaryStridedAndExpandedViews, "elementwise.binary") {
  const View transposed = [](const Tensor& t) { return t.transpose(0, 1); };                 // [33, 7] -> [7, 33]
  const View every_other = [](const Tensor& t) { return t.slice(1, 1, 67, 2); };             // [7, 67] -> [7, 33]
  const View expanded_row = [](const Tensor& t) { return t.expand({7, 33}); };               // [1, 33] -> [7, 33]
  const View expanded_col = [](const Tensor& t) { return t.expand({7, 33}); };               // [7, 1] -> [7, 33]
  const View permuted = [](const Tensor& t) { return t.permute({3, 1, 0, 2}); };             // [2, 3, 4, 5] -> [5, 3, 2, 4]
  const View permuted_other = [](const Tensor& t) { return t.permute({0, 2, 1, 3}); };       // [5, 2, 4, 3] -> [5, 4, 2, 3]
  for (BinaryOp op : kBinaryOps) {
    EXPECT_TRUE(binary_matches(op, operand({33, 7}, 21), operand({7, 67}, 22), transposed, every_other));
    EXPECT_TRUE(binary_matches(op, operand({7, 67}, 23), operand({33, 7}, 24), every_other, transposed));
    EXPECT_TRUE(binary_matches(op, operand({1, 33}, 25), operand({7, 1}, 26), expanded_row, expanded_col));
    EXPECT_TRUE(binary_matches(op, operand({33, 7}, 27), operand({1, 33}, 28), transposed, expanded_row));
    EXPECT_TRUE(binary_matches(op, operand({2, 3, 4, 5}, 29), operand({5, 2, 4, 3}, 30),
                               [](const Tensor& t) { return t.permute({3, 1, 0, 2}).transpose(1, 3); },  // [5, 4, 2, 3]
                               permuted_other));
    EXPECT_TRUE(binary_matches(op, operand({2, 3, 4, 5}, 31), operand({2, 1}, 32), permuted, kWhole));
    // Size 1 dims with odd strides, and an empty slice.
    EXPECT_TRUE(binary_matches(op, operand({7, 1, 33}, 33), operand({33, 1, 7}, 34),
                               kWhole, [](const Tensor& t) { return t.permute({2, 1, 0}); }));
    EXPECT_TRUE(binary_matches(op, operand({7, 33}, 35), operand({7, 33}, 36),
                               [](const Tensor& t) { return t.slice(0, 3, 3); },
                               [](const Tensor& t) { return t.slice(0, 5, 5); }));
  }
}

PARITY_TEST(BinaryPastTheGridCap, "elementwise.binary") {
  // More elements than 65536 blocks of 256 threads cover in one pass: the
  // grid-stride loops must go round, contiguous and strided.
  const int64_t n = (int64_t{1} << 24) + 3;
  EXPECT_TRUE(binary_matches(BinaryOp::add, operand({n}, 41), operand({n}, 42), kWhole, kWhole));
  EXPECT_TRUE(binary_matches(BinaryOp::mul, operand({4099, 4097}, 43), operand({4097}, 44),
                             [](const Tensor& t) { return t.transpose(0, 1); },
                             [](const Tensor& t) { return t.unsqueeze(1); }));
}

PARITY_TEST(BinarySpecialValues, "elementwise.binary") {
  // Every pair of special values: infinities, signed zeros, NaN, overflow
  // and subnormal results must be the CPU's (NaN only where the CPU's is).
  const std::vector<float> specials = {0.0f, -0.0f, 1.0f, -3.0f, INFINITY, -INFINITY, NAN, 3e38f, 1e-38f, 1e-45f};
  const int64_t k = static_cast<int64_t>(specials.size());
  Tensor a = Tensor::from_vector(specials, {k, 1}), b = Tensor::from_vector(specials, {1, k});
  for (BinaryOp op : kBinaryOps) EXPECT_TRUE(binary_matches(op, a, b, kWhole, kWhole)) << static_cast<int>(op);
}

PARITY_TEST(UnaryExactOps, "elementwise.unary") {
  // x + s, x·s, -x and √x are IEEE operations (nvcc's default -prec-sqrt):
  // the CPU's bits, NaN aside.
  struct Case {
    UnaryOp op;
    float s;
  };
  const Case cases[] = {{UnaryOp::add_scalar, 0.37f}, {UnaryOp::add_scalar, -1e30f}, {UnaryOp::mul_scalar, -1.7f},
                        {UnaryOp::mul_scalar, 0.0f},  {UnaryOp::neg, 0.0f},          {UnaryOp::sqrt, 0.0f}};
  for (int64_t n : {0, 1, 7, 33, 1003})
    for (const Case& c : cases) {
      const Tensor x = unary_input(n, 50 + n, c.op == UnaryOp::sqrt ? 0.0 : -4.0, 4.0);
      EXPECT_TRUE(same_bits_but_nan_payload(unary_on(Device::cuda(0), c.op, x, c.s), unary_on(Device::cpu(), c.op, x, c.s)))
          << "n = " << n << ", op " << static_cast<int>(c.op) << ", s = " << c.s;
    }
}

PARITY_TEST(UnaryTranscendentalOps, "elementwise.unary") {
  // libdevice's expf, logf, powf and tanhf are within 1-4 ulp of the exact
  // value and glibc's within 1-2, so an element differs by at most ~6 ulp
  // (7e-7 relative) and the normalised error is at most ~5e-13, in practice
  // far less; a wrong formula or constant is off by 1e-8 and more.
  // 1e-11 leaves margin for the worst case and still fails any slip.
  constexpr double kTolerance = 1e-11;
  struct Case {
    UnaryOp op;
    float s;
    double low, high;
  };
  const Case cases[] = {
      {UnaryOp::exp, 0.0f, -20.0, 20.0},           {UnaryOp::exp, 0.0f, -100.0, 80.0},  // subnormal results, near overflow
      {UnaryOp::log, 0.0f, 1e-6, 100.0},           {UnaryOp::log, 0.0f, -1.0, 1.0},     // negative: NaN
      {UnaryOp::pow_scalar, 2.0f, -3.0, 3.0},      {UnaryOp::pow_scalar, 0.5f, 0.0, 9.0},
      {UnaryOp::pow_scalar, -1.5f, 0.01, 3.0},     {UnaryOp::pow_scalar, 3.3f, -1.0, 3.0},
      {UnaryOp::pow_scalar, 0.0f, -2.0, 2.0},      {UnaryOp::tanh, 0.0f, -10.0, 10.0},
      {UnaryOp::tanh, 0.0f, -0.01, 0.01},          {UnaryOp::pow_scalar_grad, 2.0f, -3.0, 3.0},
      {UnaryOp::pow_scalar_grad, 0.5f, 0.0, 9.0},  {UnaryOp::pow_scalar_grad, -1.5f, 0.01, 3.0},
      {UnaryOp::pow_scalar_grad, 3.3f, 0.0, 3.0},  {UnaryOp::tanh_grad, 0.0f, -1.0, 1.0},
  };
  for (int64_t n : {0, 1, 7, 33, 1003})
    for (const Case& c : cases) {
      const Tensor x = unary_input(n, 70 + n, c.low, c.high);
      EXPECT_TRUE(close_to_cpu(unary_on(Device::cuda(0), c.op, x, c.s), unary_on(Device::cpu(), c.op, x, c.s), kTolerance))
          << "n = " << n << ", op " << static_cast<int>(c.op) << ", s = " << c.s << ", x in [" << c.low << ", "
          << c.high << ")";
    }
}

PARITY_TEST(ElementwiseOpsOnViews, "elementwise.binary", "elementwise.unary") {
  // Through the autograd ops: broadcasting a strided operand, and a unary op
  // of a transposed input (the op makes it contiguous with copy.copy first).
  const Tensor a = operand({33, 7}, 81), b = operand({7}, 82);
  const Tensor ga = gpu_copy(a), gb = gpu_copy(b);
  EXPECT_TRUE(same_bits_but_nan_payload(mul(ga.transpose(0, 1), gb.unsqueeze(1)), mul(a.transpose(0, 1), b.unsqueeze(1))));
  EXPECT_TRUE(same_bits_but_nan_payload(neg(ga.transpose(0, 1)), neg(a.transpose(0, 1))));
  EXPECT_TRUE(close_to_cpu(exp(ga.transpose(0, 1)), exp(a.transpose(0, 1)), 1e-11));
}
