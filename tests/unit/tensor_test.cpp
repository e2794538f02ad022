#include <gtest/gtest.h>

#include "autograd/ops.h"
#include "tensor/storage.h"
#include "tensor/tensor.h"

using namespace cmha;

TEST(Tensor, ContiguousStoragesAreAligned) {
  for (int64_t n : {1, 3, 17, 1000}) {
    Tensor t = Tensor::empty({n});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
  }
}

TEST(Tensor, ViewsShareStorageAndCopiesDoNot) {
  Tensor t = Tensor::arange(12).reshape({3, 4});
  Tensor tt = t.transpose(0, 1);
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.raw_data(), t.raw_data());
  EXPECT_EQ(tt.contiguous().to_float_vector(),
            (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  Tensor s = t.slice(1, 1, 4, 2);
  EXPECT_EQ(s.shape(), (Shape{3, 2}));
  EXPECT_EQ(s.to_float_vector(), (std::vector<float>{1, 3, 5, 7, 9, 11}));
  Tensor e = Tensor::from_vector({1, 2}, {2, 1}).expand({2, 3});
  EXPECT_EQ(e.strides()[1], 0);
  EXPECT_EQ(e.to_float_vector(), (std::vector<float>{1, 1, 1, 2, 2, 2}));
}

TEST(Tensor, DtypeConversionsRoundTrip) {
  Tensor t = Tensor::from_vector({1.5f, -2.25f, 3.0f, 65504.0f}, {4});
  EXPECT_EQ(t.to(DType::f16).to(DType::f32).to_float_vector(), t.to_float_vector());
  EXPECT_EQ(t.to(DType::bf16).to(DType::f32).to_float_vector(), (std::vector<float>{1.5f, -2.25f, 3.0f, 65536.0f}));
  EXPECT_EQ(t.to(DType::i64).to_i64_vector(), (std::vector<int64_t>{1, -2, 3, 65504}));
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256).bits, float_to_bf16(1.0f).bits);  // ties to even
}

TEST(Tensor, ErrorsNameOpAndShape) {
  Tensor t = Tensor::zeros({2, 3});
  try {
    t.view({4, 2});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "view: cannot reshape f32[2, 3] on cpu (6 elements) to [4, 2]");
  }
  EXPECT_THROW(t.transpose(0, 1).view({6}), Error);
  EXPECT_THROW(t.permute({0, 0}), Error);
  EXPECT_THROW(t.expand({3, 3}), Error);
  EXPECT_THROW(t.squeeze(0), Error);
  EXPECT_THROW(t.size(2), Error);
  EXPECT_THROW(t.data<int64_t>(), Error);
  EXPECT_THROW(Tensor::zeros({2}, DType::i64).set_requires_grad(true), Error);
  EXPECT_THROW(Tensor().shape(), Error);
}

TEST(Tensor, DevicesParseAndCudaIsAnErrorWithoutTheBackend) {
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::parse("cpu").str(), "cpu");
  EXPECT_THROW(Device::parse("gpu0"), Error);
  EXPECT_THROW(Device::parse("cuda:x"), Error);
#ifndef CMHA_WITH_CUDA
  EXPECT_EQ(cuda_device_count(), 0);
  EXPECT_THROW(Tensor::zeros({2}, DType::f32, Device::cuda(0)), Error);
#endif
}

TEST(Tensor, LargeFreedBlocksAreReusedAndCanBeReleased) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the block cache is off under AddressSanitizer";
#else
  release_cached_cpu_memory();
  void* first;
  {
    Tensor t = Tensor::empty({3, 1 << 20});  // 12 MiB
    first = t.raw_data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % (2 << 20), 0u);  // huge-page aligned
  }
  EXPECT_EQ(cached_cpu_bytes(), size_t{12} << 20);
  Tensor again = Tensor::empty({3 << 20});  // the same size in another shape
  EXPECT_EQ(again.raw_data(), first);
  EXPECT_EQ(cached_cpu_bytes(), 0u);
  { Tensor small = Tensor::empty({1000}); }  // small blocks go back to malloc
  EXPECT_EQ(cached_cpu_bytes(), 0u);
  { Tensor other = Tensor::empty({1 << 20}); }
  EXPECT_GT(cached_cpu_bytes(), 0u);
  release_cached_cpu_memory();
  // Sizes of one class share blocks: 12.5 MiB and 13.9 MiB both take a 14 MiB block.
  void* block;
  {
    Tensor a = Tensor::empty({(25 << 20) / 8});
    block = a.raw_data();
  }
  EXPECT_EQ(cached_cpu_bytes(), size_t{14} << 20);
  Tensor b = Tensor::empty({(139 << 20) / 40});
  EXPECT_EQ(b.raw_data(), block);
  // A smaller request takes a cached block up to twice its size (and gives the
  // whole block back), never a larger one.
  b = Tensor();
  Tensor c = Tensor::empty({(8 << 20) / 4});  // 8 MiB from the 14 MiB block
  EXPECT_EQ(c.raw_data(), block);
  c = Tensor();
  EXPECT_EQ(cached_cpu_bytes(), size_t{14} << 20);
  Tensor d = Tensor::empty({(6 << 20) / 4});  // 6 MiB: 14 is more than twice, so a new block
  EXPECT_NE(d.raw_data(), block);
  release_cached_cpu_memory();
  EXPECT_EQ(cached_cpu_bytes(), 0u);
#endif
}

// The peak of CPU tensor memory counts live blocks only: it rises with a
// large tensor, stays after it is freed, and a freed block taken back from
// the cache counts again.
TEST(Tensor, PeakCpuTensorMemoryCountsLiveBlocks) {
  const double before = peak_cpu_tensor_mb();
  {
    Tensor big = Tensor::empty({int64_t{64} << 18});  // 64 MiB of f32
    EXPECT_GE(peak_cpu_tensor_mb(), 64.0);
    EXPECT_GE(peak_cpu_tensor_mb(), before);
  }
  const double after = peak_cpu_tensor_mb();
  EXPECT_GE(after, 64.0);
  {
    Tensor small = Tensor::empty({int64_t{1} << 18});  // 1 MiB: below the peak, which stays
    EXPECT_EQ(peak_cpu_tensor_mb(), after);
  }
}

// The cache keeps a freed block only while live tensors plus cached blocks
// stay within the most live tensors ever held: memory no step asked for goes
// back to the system.
TEST(Tensor, TheBlockCacheNeverHoldsMoreThanThePeakOfLiveTensors) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the block cache is off under AddressSanitizer";
#else
  release_cached_cpu_memory();
  // Blocks of S, a power of two (a size class of its own) at least the
  // earlier peak, so that two of them set a new peak whatever ran before.
  constexpr int64_t kMiB = int64_t{1} << 20;
  int64_t s = 64 * kMiB;
  while (static_cast<double>(s) < peak_cpu_tensor_mb() * kMiB) s *= 2;
  Tensor a = Tensor::empty({s / 4}), b = Tensor::empty({s / 4});  // the peak: live + 2S
  a = Tensor();
  EXPECT_EQ(cached_cpu_bytes(), static_cast<size_t>(s));  // live + S cached: within the peak
  Tensor c = Tensor::empty({8 * kMiB / 4});              // a new block (S is more than twice 8 MiB)
  b = Tensor();  // live + 8 MiB + 2S cached would pass the peak: b's block is freed
  EXPECT_EQ(cached_cpu_bytes(), static_cast<size_t>(s));
  c = Tensor();  // live + S + 8 MiB: kept
  EXPECT_EQ(cached_cpu_bytes(), static_cast<size_t>(s + 8 * kMiB));
  release_cached_cpu_memory();
#endif
}
