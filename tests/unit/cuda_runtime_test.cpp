// The CUDA runtime layer (tensor/cuda_runtime.cpp). Without the backend, or
// without a GPU, device queries answer 0 and a CUDA tensor is a clear error;
// with a GPU, device memory is allocated and freed.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "support/check.h"
#include "tensor/device.h"
#include "tensor/emulated_stream.h"
#include "tensor/tensor.h"
#ifdef CMHA_WITH_CUDA
#include "tensor/cuda_runtime.h"
#endif

using namespace cmha;
using cmha::test::error_of;

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

TEST(CudaRuntime, PinnedTensorsHoldTheirValuesAndArePageLockedOnlyWithAGpu) {
  Tensor x = Tensor::from_vector({1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -1.0f}, {2, 3});
  const Tensor strided = x.transpose(0, 1);  // [3, 2], not contiguous
  const Tensor p = strided.pinned();
  EXPECT_TRUE(p.is_contiguous());
  EXPECT_EQ(p.shape(), (Shape{3, 2}));
  EXPECT_EQ(p.to_float_vector(), strided.contiguous().to_float_vector());
  const Tensor e = Tensor::empty_pinned({0, 4}, DType::i64);
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.dtype(), DType::i64);
  EXPECT_NE(error_of([] { Tensor::empty_pinned({-1}); }).find("negative size"), std::string::npos);
  // Page-locked on a real GPU; marked pinned under the asynchronous emulator
  // (CMHA_EMULATE_CUDA=async, as tests/gpu/check.sh runs this), which copies
  // pinned blocks late as a GPU does; plain host memory otherwise.
  const bool real_gpu = cuda_device_count() > 0 && !cuda_emulated();
  EXPECT_EQ(p.is_pinned(), real_gpu || cuda_emulated_async());
  EXPECT_FALSE(x.is_pinned());
  if (!cuda_emulated_async()) {
    set_cuda_emulated(true);
    EXPECT_FALSE(Tensor::empty_pinned({4}).is_pinned());  // the synchronous emulator has host memory: nothing to lock
    set_cuda_emulated(false);
  }
}

#ifdef CMHA_WITH_CUDA
TEST(CudaRuntime, PinnedCopiesArriveWhileTheHostGoesOn) {
  if (cuda_device_count() == 0 || cuda_emulated()) GTEST_SKIP() << "no CUDA device here";
  // 64 MiB from page-locked memory: the copy is queued, the host buffer is
  // dropped at once and a new one of the same size (which must not be the
  // same block while the copy may still read it) is overwritten.
  const int64_t n = int64_t{16} << 20;
  Tensor host = Tensor::empty_pinned({n});
  ASSERT_TRUE(host.is_pinned());
  EXPECT_TRUE(cuda_host_pinned(host.raw_data()));
  EXPECT_TRUE(cuda_host_pinned(static_cast<char*>(host.raw_data()) + 4 * n - 1));
  float* h = host.data<float>();
  for (int64_t i = 0; i < n; ++i) h[i] = static_cast<float>(i % 1009);
  Tensor dev = host.to(Device::cuda(0));
  host = Tensor();
  Tensor next = Tensor::empty_pinned({n});
  std::fill(next.data<float>(), next.data<float>() + n, -1.0f);
  const std::vector<float> back = dev.to(Device::cpu()).to_float_vector();
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += back[static_cast<size_t>(i)] != static_cast<float>(i % 1009);
  EXPECT_EQ(wrong, 0);
  // The second copy, after the first has finished, reuses a cached block.
  Tensor dev2 = next.to(Device::cuda(0));
  EXPECT_EQ(dev2.to(Device::cpu()).to_float_vector()[12345], -1.0f);
  int on_stack = 0;
  EXPECT_FALSE(cuda_host_pinned(&on_stack));
}

TEST(CudaRuntime, CopiesAheadArriveOnceAwaitedAndMayBeDroppedUnused) {
  if (cuda_device_count() == 0 || cuda_emulated()) GTEST_SKIP() << "no CUDA device here";
  const int64_t n = int64_t{8} << 20;
  Tensor host = Tensor::empty_pinned({n});
  for (int64_t i = 0; i < n; ++i) host.data<float>()[i] = static_cast<float>(i % 4099);
  // Work queued before: a long chain the copy must come after.
  Tensor busy = Tensor::ones({n}, DType::f32, Device::cuda(0));
  for (int i = 0; i < 20; ++i) busy.fill_(static_cast<double>(i));
  Tensor ahead, dropped;
  {
    CopyAheadScope scope;
    EXPECT_TRUE(copying_ahead());
    ahead = host.to(Device::cuda(0));
    dropped = host.to(Device::cuda(0));
  }
  EXPECT_FALSE(copying_ahead());
  dropped = Tensor();  // freed unused: its block's next owner comes after the copy
  Tensor reuse = Tensor::full({n}, -3.0, DType::f32, Device::cuda(0));
  await_copies_ahead(Device::cuda(0));
  const std::vector<float> back = ahead.to(Device::cpu()).to_float_vector();
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += back[static_cast<size_t>(i)] != static_cast<float>(i % 4099);
  EXPECT_EQ(wrong, 0);
  const std::vector<float> r = reuse.to(Device::cpu()).to_float_vector();
  EXPECT_EQ(std::count(r.begin(), r.end(), -3.0f), n);
  EXPECT_EQ(busy.to(Device::cpu()).to_float_vector()[7], 19.0f);
}

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
