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
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device here";
  void* p = cuda_alloc(1 << 20, 0);
  EXPECT_NE(p, nullptr);
  cuda_free(p, 0);
  Tensor t = Tensor::empty({256, 256}, DType::f32, Device::cuda(0));
  EXPECT_EQ(t.device(), Device::cuda(0));
  EXPECT_FALSE(cuda_device_description(0).empty());
  const std::string msg = error_of([] { cuda_alloc(size_t{1} << 60, 0); });  // an exabyte: out of memory
  EXPECT_NE(msg.find("cudaMalloc"), std::string::npos) << msg;
}
#endif
