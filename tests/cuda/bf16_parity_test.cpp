// GPU parity of the bf16 activations of train.bf16: every kernel that reads
// or writes activations, on bf16 and mixed f32/bf16 tensors, through the
// autograd ops (forward and the inputs' gradients for a bf16 upstream
// gradient). Both devices compute in f32 and round once, so the selects,
// products and sums give the CPU's bits; where the GPU's expf/erfcxf differ
// from the CPU's by a few f32 ulp, a result may round to the neighbouring
// bf16 value (2^-8 relative): a normalised error below 1e-5 allows a few such
// elements, and a wrong formula or a value read as the wrong dtype is off by
// far more.
#include <functional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "cuda/parity.h"

using namespace cmha;
using namespace cmha::test;

namespace {

constexpr double kRoundingTolerance = 1e-5;

using Op = std::function<Tensor(const std::vector<Tensor>&)>;

// op on the CPU and on cuda:0 from the same inputs (floating ones require
// grad), then backward from the same bf16-valued upstream gradient: the
// output and every input's gradient, exactly (`exact`) or within rounding.
void expect_gpu_follows_cpu(const std::string& name, const Op& op, const std::vector<Tensor>& inputs, bool exact) {
  SCOPED_TRACE(name);
  auto run = [&](Device device) {
    std::vector<Tensor> leaves;
    for (const Tensor& t : inputs) {
      Tensor l = device.is_cpu() ? t.clone() : t.contiguous().to(device);
      if (is_floating(t.dtype())) l.set_requires_grad(true);
      leaves.push_back(l);
    }
    Tensor y = op(leaves);
    const Tensor g = random_of(y.shape(), DType::bf16, 77).to(y.dtype());
    y.backward(device.is_cpu() ? g : g.to(device));
    std::vector<Tensor> results{y};
    for (const Tensor& l : leaves)
      if (l.requires_grad()) results.push_back(l.grad());
    return results;
  };
  const std::vector<Tensor> cpu = run(Device::cpu()), gpu = run(Device::cuda(0));
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(gpu[i].dtype(), cpu[i].dtype()) << (i == 0 ? "output" : "gradient " + std::to_string(i - 1));
    if (exact) EXPECT_TRUE(same_as_cpu(gpu[i], cpu[i])) << (i == 0 ? "output" : "gradient " + std::to_string(i - 1));
    else
      EXPECT_TRUE(close_to_cpu(gpu[i], cpu[i], kRoundingTolerance))
          << (i == 0 ? "output" : "gradient " + std::to_string(i - 1));
  }
}

Tensor bf16_input(const Shape& shape, uint64_t seed, double range = 3.0) {
  return random_of(shape, DType::bf16, seed, -range, range);
}

}  // namespace

PARITY_TEST(Bf16ActivationsFollowTheCpu, "activation.relu", "activation.relu_backward", "activation.gelu",
            "activation.gelu_backward", "dropout.forward", "dropout.backward", "elementwise.binary",
            "elementwise.unary", "reduce.sum") {
  const Tensor x = bf16_input({37, 129}, 1);
  expect_gpu_follows_cpu("relu", [](auto& t) { return relu(t[0]); }, {x}, true);
  expect_gpu_follows_cpu("gelu", [](auto& t) { return gelu(t[0]); }, {x}, false);
  expect_gpu_follows_cpu("gelu tanh", [](auto& t) { return gelu(t[0], true); }, {x}, false);
  expect_gpu_follows_cpu("dropout", [](auto& t) {
    Generator gen(9);
    return dropout(t[0], 0.25f, true, gen);
  }, {x}, true);
  expect_gpu_follows_cpu("mul_scalar", [](auto& t) { return mul_scalar(t[0], 0.125f); }, {x}, true);
  // The residual stream (f32) plus a bf16 sublayer output and a broadcast bf16 bias.
  const Tensor residual = random_of({37, 129}, DType::f32, 2), bias = bf16_input({129}, 3);
  expect_gpu_follows_cpu("mixed add", [](auto& t) { return add(add(t[0], t[1]), t[2]); }, {residual, x, bias}, true);
  expect_gpu_follows_cpu("bf16 mul", [](auto& t) { return mul(t[0], t[1]); }, {x, bias}, false);
  expect_gpu_follows_cpu("bf16 sum", [](auto& t) { return sum(t[0], {0}); }, {x}, false);
}

PARITY_TEST(Bf16SoftmaxAndLayerNormFollowTheCpu, "softmax.forward", "softmax.backward", "layer_norm.forward",
            "layer_norm.backward") {
  const Tensor x = bf16_input({6, 33, 70}, 4, 6.0);
  expect_gpu_follows_cpu("softmax rows", [](auto& t) { return softmax(t[0], -1); }, {x}, false);
  expect_gpu_follows_cpu("softmax columns", [](auto& t) { return softmax(t[0], 1); }, {x}, false);
  expect_gpu_follows_cpu("log_softmax", [](auto& t) { return log_softmax(t[0], -1); }, {x}, false);
  // Attention: f32 scores in, bf16 probabilities out, the f32 gradient back.
  const Tensor scores = random_of({6, 33, 70}, DType::f32, 5, -6.0, 6.0);
  expect_gpu_follows_cpu("softmax f32 -> bf16", [](auto& t) { return softmax(t[0], -1, DType::bf16); }, {scores},
                         false);
  const Tensor w = random_of({70}, DType::f32, 6, 0.5, 1.5), b = random_of({70}, DType::f32, 7);
  expect_gpu_follows_cpu("layer_norm", [](auto& t) { return layer_norm(t[0], t[1], t[2]); }, {x, w, b}, false);
}

PARITY_TEST(Bf16CollaborativeQueriesFollowTheCpu, "attention.collaborative_queries",
            "attention.collaborative_queries_backward") {
  const Tensor q = bf16_input({3, 17, 40}, 8), mixing = random_of({5, 40}, DType::f32, 9);
  expect_gpu_follows_cpu("collaborative_queries", [](auto& t) { return collaborative_queries(t[0], t[1], 0.25f); },
                         {q, mixing}, false);
}
