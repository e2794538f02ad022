// The NCCL communicator on one GPU (world size 1, the host side a
// SingleCommunicator): the collectives are the identity on device memory,
// ordered against the compute stream, in f32 and bf16. Without a GPU the
// construction must fail with a sentence, never crash.
#include <gtest/gtest.h>

#ifdef CMHA_WITH_NCCL
#include <memory>
#include <vector>

#include "autograd/ops.h"
#include "distributed/nccl_communicator.h"
#include "support/check.h"
#include "tensor/cuda_runtime.h"
#include "tensor/tensor.h"

using namespace cmha;

namespace {
bool have_gpu() { return cuda_device_count() > 0 && !cuda_emulated(); }
}  // namespace

TEST(NcclOneGpu, WithoutAGpuTheCommunicatorIsAClearError) {
  if (have_gpu()) GTEST_SKIP() << "a GPU is present: NcclOneGpu.CollectivesAreTheIdentity covers it";
  const std::string e =
      test::error_of([] { distributed::NcclCommunicator(std::make_unique<distributed::SingleCommunicator>(), 0, 30); });
  EXPECT_FALSE(e.empty());
  EXPECT_EQ(e.find("internal error"), std::string::npos) << e;
  EXPECT_NE(e.find("cuda:0"), std::string::npos) << e;
}

TEST(NcclOneGpu, CollectivesAreTheIdentity) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device here";
  distributed::NcclCommunicator c(std::make_unique<distributed::SingleCommunicator>(), 0, 30);
  EXPECT_EQ(c.size(), 1);
  const int64_t n = 1000003;
  Tensor x = Tensor::arange(n, DType::f32).to(Device::cuda(0));
  // Queued right after the kernel that fills x: the collective must see the filled values.
  Tensor y = add(x, x);
  auto r = c.all_reduce_async(static_cast<float*>(y.raw_data()), static_cast<size_t>(n), distributed::ReduceOp::sum);
  r->wait();
  c.all_reduce(static_cast<float*>(y.raw_data()), static_cast<size_t>(n), distributed::ReduceOp::average);
  const std::vector<float> back = y.to(Device::cpu()).to_float_vector();
  EXPECT_EQ(back[0], 0.0f);
  EXPECT_EQ(back[12345], 24690.0f);
  EXPECT_EQ(back[static_cast<size_t>(n - 1)], 2.0f * static_cast<float>(n - 1));
  // bf16 round trip: one rank's sum is its own bits.
  Tensor h = Tensor::arange(4099, DType::f32).to(DType::bf16).to(Device::cuda(0));
  const Tensor before = h.to(Device::cpu());
  c.all_reduce_async(static_cast<bf16*>(h.raw_data()), 4099, distributed::ReduceOp::sum)->wait();
  EXPECT_TRUE(test::all_close(h.to(Device::cpu()).to(DType::f32), before.to(DType::f32), 0, 0));
  c.barrier();
}
#else
TEST(NcclOneGpu, SkippedWithoutNccl) { GTEST_SKIP() << "cmha was built without NCCL (no CUDA, or neither MPI nor Gloo)"; }
#endif
