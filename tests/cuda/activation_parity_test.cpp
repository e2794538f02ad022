// GPU parity of the activation family: ReLU and GELU (erf and tanh forms),
// forward and backward, the kernels and the autograd ops.
#include <cmath>
#include <vector>

#include "autograd/ops.h"
#include "backend/kernels.h"
#include "cuda/parity.h"
#include "cuda/same_bits.h"

using namespace cmha;
using namespace cmha::test;

namespace {

// GELU on the GPU uses libdevice's expf (2 ulp) and erfcxf (4 ulp) where the
// CPU has its own polynomials (≤ 2 ulp, backend/cpu/vec_math.h): an element
// differs by a few ulp, so the normalised error is below ~5e-13 even if every
// element were that far off (the CPU polynomials against exact functions
// measure ~2e-15 over [-12, 12]). A wrong constant or term is off by 1e-8
// and more.
constexpr double kGeluTolerance = 1e-11;

// n values uniform in [-range, range), the last ones special.
Tensor input(int64_t n, uint64_t seed, double range) {
  Tensor t = random_of({n}, DType::f32, seed, -range, range);
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e20f, -1e20f, 1e-40f, -9.5f, 13.5f, -13.5f, 5e12f};
  for (int64_t i = 0; i < n && i < 12; ++i) t.data<float>()[n - 1 - i] = specials[i];
  return t;
}

const int64_t kActivationSizes[] = {0, 1, 7, 33, 1003, 100003};

}  // namespace

PARITY_TEST(ReluForwardAndBackward, "activation.relu", "activation.relu_backward") {
  // Selects only (x < 0 ? 0 : x, y > 0 ? g : 0): the CPU's bits, NaN payload included.
  for (int64_t n : kActivationSizes) {
    const Tensor x = input(n, 1 + n, 3.0), g = input(n, 2 + n, 1.0);
    Tensor y = Tensor::empty({n}), gy = Tensor::empty({n}, DType::f32, Device::cuda(0));
    CMHA_KERNEL(Device::cpu(), activation.relu)(x, y);
    CMHA_KERNEL(Device::cuda(0), activation.relu)(gpu_copy(x), gy);
    EXPECT_TRUE(same_as_cpu(gy, y)) << "n = " << n;
    Tensor dx = Tensor::empty({n}), gdx = Tensor::empty({n}, DType::f32, Device::cuda(0));
    CMHA_KERNEL(Device::cpu(), activation.relu_backward)(y, g, dx);
    CMHA_KERNEL(Device::cuda(0), activation.relu_backward)(gpu_copy(y), gpu_copy(g), gdx);
    EXPECT_TRUE(same_as_cpu(gdx, dx)) << "n = " << n;
  }
}

PARITY_TEST(GeluForwardAndBackward, "activation.gelu", "activation.gelu_backward") {
  for (bool tanh_form : {false, true})
    for (double range : {1.0, 4.0, 12.0})
      for (int64_t n : kActivationSizes) {
        const Tensor x = input(n, 10 + n, range), g = input(n, 20 + n, 1.0);
        Tensor y = Tensor::empty({n}), gy = Tensor::empty({n}, DType::f32, Device::cuda(0));
        CMHA_KERNEL(Device::cpu(), activation.gelu)(x, y, tanh_form);
        CMHA_KERNEL(Device::cuda(0), activation.gelu)(gpu_copy(x), gy, tanh_form);
        EXPECT_TRUE(close_to_cpu(gy, y, kGeluTolerance)) << "n = " << n << ", range " << range << ", tanh " << tanh_form;
        Tensor dx = Tensor::empty({n}), gdx = Tensor::empty({n}, DType::f32, Device::cuda(0));
        CMHA_KERNEL(Device::cpu(), activation.gelu_backward)(x, g, dx, tanh_form);
        CMHA_KERNEL(Device::cuda(0), activation.gelu_backward)(gpu_copy(x), gpu_copy(g), gdx, tanh_form);
        EXPECT_TRUE(close_to_cpu(gdx, dx, kGeluTolerance)) << "n = " << n << ", range " << range << ", tanh " << tanh_form;
      }
}

PARITY_TEST(ActivationOpsWithBackward, "activation.relu", "activation.relu_backward", "activation.gelu",
            "activation.gelu_backward") {
  // The autograd ops on a transposed input, gradients through backward().
  const Tensor x = random_of({33, 7}, DType::f32, 31, -3.0, 3.0), g = random_of({7, 33}, DType::f32, 32);
  auto run = [&](Device device, int which) {
    Tensor leaf = (device.is_cpu() ? x.clone() : gpu_copy(x)).set_requires_grad(true);
    const Tensor gd = device.is_cpu() ? g : gpu_copy(g);
    Tensor y = which == 0 ? relu(leaf.transpose(0, 1)) : gelu(leaf.transpose(0, 1), which == 2);
    y.backward(gd);
    return std::vector<Tensor>{y, leaf.grad()};
  };
  const std::vector<Tensor> cpu_relu = run(Device::cpu(), 0), gpu_relu = run(Device::cuda(0), 0);
  EXPECT_TRUE(same_as_cpu(gpu_relu[0], cpu_relu[0]));
  EXPECT_TRUE(same_as_cpu(gpu_relu[1], cpu_relu[1]));
  for (int which : {1, 2}) {
    const std::vector<Tensor> c = run(Device::cpu(), which), d = run(Device::cuda(0), which);
    EXPECT_TRUE(close_to_cpu(d[0], c[0], kGeluTolerance)) << "tanh " << (which == 2);
    EXPECT_TRUE(close_to_cpu(d[1], c[1], kGeluTolerance)) << "tanh " << (which == 2);
  }
}
