// The CUDA runtime layer (tensor/cuda_runtime.cpp). Without the backend, or
// without a GPU, device queries answer 0 and a CUDA tensor is a clear error;
// with a GPU, device memory is allocated and freed.
#include <gtest/gtest.h>

#include <functional>

#include "tensor/device.h"
#include "tensor/tensor.h"
#ifdef CMHA_WITH_CUDA
#include "tensor/cuda_runtime.h"
#endif

using namespace cmha;

namespace {
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(CudaRuntime, DeviceCountNeverThrows) {
  int n = -1;
  EXPECT_NO_THROW(n = cuda_device_count());
  EXPECT_GE(n, 0);
#ifndef CMHA_WITH_CUDA
  EXPECT_EQ(n, 0);
#endif
}

TEST(CudaRuntime, TensorOnAMissingDeviceIsAnErrorNamingIt) {
  const int n = cuda_device_count();
  const std::string msg = error_of([&] { Tensor::empty({4}, DType::f32, Device::cuda(n)); });
  EXPECT_NE(msg.find("cuda:" + std::to_string(n)), std::string::npos) << msg;
#ifdef CMHA_WITH_CUDA
  if (n == 0) {
    // No driver or no GPU: the message says so, naming the CUDA call that failed or the count.
    EXPECT_TRUE(msg.find("cudaGetDeviceCount") != std::string::npos || msg.find("0 CUDA devices") != std::string::npos)
        << msg;
  }
#else
  EXPECT_NE(msg.find("without CUDA"), std::string::npos) << msg;
#endif
}

#ifdef CMHA_WITH_CUDA
TEST(CudaRuntime, AllocatesAndFreesWhenAGpuIsPresent) {
  if (cuda_device_count() == 0 || cuda_emulated()) GTEST_SKIP() << "no CUDA device here";
  void* p = cuda_alloc(1 << 20, 0);
  EXPECT_NE(p, nullptr);
  cuda_free(p, 0);
  Tensor t = Tensor::empty({256, 256}, DType::f32, Device::cuda(0));
  EXPECT_EQ(t.device(), Device::cuda(0));
  EXPECT_FALSE(cuda_device_description(0).empty());
  // An exabyte: out of memory, saying how much was asked, what is free and which keys shrink the need.
  const std::string msg = error_of([] { cuda_alloc(size_t{1} << 60, 0); });
  for (const char* part : {"out of memory on cuda:0", "asked for 1099511627776.0 MiB", "free of", "data.batch_tokens",
                           "train.update_freq"})
    EXPECT_NE(msg.find(part), std::string::npos) << part << " in: " << msg;
  // Freed blocks go back to the pool, not the driver: the same size again does not grow it.
  const CudaMemoryStats before = cuda_memory_stats(0);
  for (int i = 0; i < 10; ++i) cuda_free(cuda_alloc(size_t{64} << 20, 0), 0);
  cuda_synchronize(0, "test");
  const CudaMemoryStats after = cuda_memory_stats(0);
  EXPECT_LE(after.pool_growths - before.pool_growths, 1u);
  EXPECT_EQ(after.allocations - before.allocations, 10u);
}
#endif
