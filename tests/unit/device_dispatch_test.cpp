// Devices and the kernel table: host code cannot read device memory, ops do
// not mix devices, a kernel a device lacks is an error naming the kernel and
// the device (never a CPU fallback), and train.device is checked at start-up.
// The device tensors here borrow memory that is never touched: every check
// fires before any access, so the tests run without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "autograd/ops.h"
#include "backend/kernels.h"
#include "support/check.h"
#include "support/text.h"
#include "support/tiny_images.h"

namespace cmha {
namespace {

using cmha::test::has;

// A tensor "on cuda:0" over host memory that no check lets anyone read.
Tensor fake_cuda(const Shape& shape, float* memory) { return Tensor::from_blob(memory, shape, DType::f32, Device::cuda(0)); }

TEST(DeviceDispatch, HostAccessToDeviceMemoryNamesTheOp) {
  float memory[6] = {};
  const Tensor t = fake_cuda({2, 3}, memory);
  EXPECT_EQ(t.device(), Device::cuda(0));
  const std::string e = test::error_of([&] { t.data<float>("my_op"); });
  EXPECT_TRUE(has(e, "my_op") && has(e, "cuda:0") && has(e, "host code cannot read")) << e;
  EXPECT_TRUE(has(test::error_of([&] { t.to_float_vector(); }), "cuda")) << "a device tensor must not be read in place";
}

TEST(DeviceDispatch, MixingDevicesInOneOpNamesBoth) {
  float memory[3] = {};
  Tensor cpu_t = Tensor::zeros({3});
  const Tensor cuda_t = fake_cuda({3}, memory);
  // (copy_ across the host boundary is a transfer, as in PyTorch: not an error.)
  std::string e = test::error_of([&] { add(cpu_t, cuda_t); });
  EXPECT_TRUE(has(e, "add") && has(e, "different devices") && has(e, "cuda:0")) << e;
  e = test::error_of([&] { common_device("my_op", {cpu_t, Tensor(), cuda_t}); });
  EXPECT_TRUE(has(e, "my_op") && has(e, "f32[3] on cpu") && has(e, "f32[3] on cuda:0")) << e;
  EXPECT_EQ(common_device("my_op", {Tensor(), cpu_t}), Device::cpu());
}

TEST(DeviceDispatch, AMissingKernelNamesTheKernelAndTheDevice) {
#ifdef CMHA_WITH_CUDA
  // The CUDA table fills its entries family by family (copy, fill and the
  // rest now run real kernels, which would touch the fake memory), so the
  // check is the one CMHA_KERNEL makes of every entry: an empty one throws.
  void (*empty_entry)(const Tensor&, double) = nullptr;
  const std::string e = test::error_of([&] { backend::checked_kernel(empty_entry, "copy.fill", Device::cuda(0)); });
  EXPECT_TRUE(has(e, "copy.fill") && has(e, "no CUDA kernel") && has(e, "cuda:0")) << e;
#else
  float a[4] = {}, b[4] = {};
  Tensor dst = fake_cuda({4}, a);
  const Tensor src = fake_cuda({4}, b);
  for (const std::string& e : {test::error_of([&] { dst.copy_(src); }), test::error_of([&] { dst.fill_(1.0); }),
                               test::error_of([&] { CMHA_KERNEL(Device::cuda(0), softmax.forward); })})
    EXPECT_TRUE(has(e, "cuda:0") && has(e, "built without CUDA")) << e;
#endif
  // The CPU table has every entry the CPU runs.
  EXPECT_NO_THROW(CMHA_KERNEL(Device::cpu(), copy.copy));
  EXPECT_NO_THROW(CMHA_KERNEL(Device::cpu(), copy.fill));
}

TEST(DeviceDispatch, FromBlobAndDeviceToDeviceCopiesAreCheckedFirst) {
  float memory[4] = {};
  std::string e = test::error_of([&] { Tensor::from_blob(memory, {2, -2}, DType::f32, Device::cuda(0)); });
  EXPECT_TRUE(has(e, "from_blob") && has(e, "negative")) << e;
  // Between two devices a copy goes through the host: said before anything is allocated.
  const Tensor t = fake_cuda({4}, memory);
  e = test::error_of([&] { t.to(Device::cuda(1)); });
  EXPECT_TRUE(has(e, "to(cuda:1)") && has(e, "through the host")) << e;
  EXPECT_TRUE(t.to(Device::cuda(0)).same(t));  // the same device: the tensor itself
}

TEST(DeviceDispatch, RequireDeviceSaysWhyCudaCannotRun) {
  EXPECT_NO_THROW(backend::require_device(Device::cpu(), "train.device=cpu"));
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is visible: the no-GPU messages do not apply";
  const std::string e = test::error_of([] { backend::require_device(Device::cuda(0), "train.device=cuda"); });
  EXPECT_EQ(e.rfind("train.device=cuda: ", 0), 0u) << e;
#ifdef CMHA_WITH_CUDA
  EXPECT_TRUE(has(e, "no CUDA device is visible")) << e;
#else
  EXPECT_TRUE(has(e, "built without CUDA")) << e;
#endif
}

TEST(DeviceDispatch, TrainDeviceIsCheckedAtStartUp) {
  const std::string dir = test::temp_dir("train_device");
  test::write_tiny_fashion_mnist(dir, 20, 10);
  auto r = test::run_cmha("train " + test::tiny_run(dir, dir + "/run") + " train.max_updates=1 train.device=gpu");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "train.device=gpu: unknown device 'gpu'")) << r.output;
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is visible: the no-GPU message does not apply";
  r = test::run_cmha("train " + test::tiny_run(dir, dir + "/run") + " train.max_updates=1 train.device=cuda:1");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "train.device=cuda:1: ")) << r.output;
  EXPECT_FALSE(has(r.output, "internal error")) << r.output;
  EXPECT_FALSE(has(r.output, "update 1")) << "the check must come before training: " << r.output;
}

}  // namespace
}  // namespace cmha
