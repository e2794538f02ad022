// Data-parallel ranks on the asynchronous emulated GPU, in one process
// (distributed/emulated_nccl_communicator.h): a collective runs on the comm
// stream after the compute stream's work queued before it, the compute
// stream's work queued after its wait() sees its result, the host never
// waits for it, and the host's values go to the host communicator. The
// choice of communicator, and its errors, under the emulator. (The 2-rank
// runs over Gloo: tests/mpi, ctest's gloo_emulated_*.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "autograd/ops.h"
#include "distributed/emulated_nccl_communicator.h"
#include "distributed/launch.h"
#include "run/device.h"
#include "support/check.h"
#include "support/emulated_cuda.h"
#include "support/text.h"
#include "tensor/emulated_stream.h"

namespace cmha {
namespace {

using distributed::ReduceOp;

using test::AsyncEmulated;
using test::has;

// World size 2 in one process, the other rank holding the same values: a sum
// doubles, a gather repeats. Slow (each collective takes 20 ms), so a
// reader that does not wait for it sees the values before it; it notes
// whether it ran on an emulated stream's thread.
class TwinChannel final : public distributed::Communicator {
 public:
  std::atomic<int> float_calls{0}, host_calls{0}, off_stream{0};
  int rank() const override { return 0; }
  int size() const override { return 2; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  const char* backend() const override { return "twin"; }
  void all_reduce(float* d, size_t n, ReduceOp op) override {
    collective();
    if (op == ReduceOp::sum)
      for (size_t i = 0; i < n; ++i) d[i] *= 2;
  }
  void all_reduce(double* d, size_t n, ReduceOp op) override {
    ++host_calls;
    if (op == ReduceOp::sum)
      for (size_t i = 0; i < n; ++i) d[i] *= 2;
  }
  std::unique_ptr<distributed::Request> all_reduce_async(float* d, size_t n, ReduceOp op) override {
    all_reduce(d, n, op);
    return std::make_unique<distributed::CompletedRequest>();
  }
  std::unique_ptr<distributed::Request> all_reduce_async(bf16* d, size_t n, ReduceOp op) override {
    collective();
    if (op == ReduceOp::sum) distributed::sum_bf16(d, d, d, n);
    return std::make_unique<distributed::CompletedRequest>();
  }
  void broadcast(float*, size_t, int) override { collective(); }
  std::unique_ptr<distributed::Request> broadcast_async(float* d, size_t n, int root) override {
    broadcast(d, n, root);
    return std::make_unique<distributed::CompletedRequest>();
  }
  void all_gather(const float* send, float* recv, size_t n) override {
    collective();
    std::copy(send, send + n, recv);
    std::copy(send, send + n, recv + n);
  }
  std::unique_ptr<distributed::Request> all_gather_async(const float* send, float* recv, size_t n) override {
    all_gather(send, recv, n);
    return std::make_unique<distributed::CompletedRequest>();
  }
  void reduce_scatter(const float* send, float* recv, size_t n, ReduceOp op) override {
    collective();
    for (size_t i = 0; i < n; ++i) recv[i] = op == ReduceOp::sum ? 2 * send[i] : send[i];
  }
  std::unique_ptr<distributed::Request> reduce_scatter_async(const float* send, float* recv, size_t n,
                                                             ReduceOp op) override {
    reduce_scatter(send, recv, n, op);
    return std::make_unique<distributed::CompletedRequest>();
  }
  std::vector<std::string> all_gather_bytes(const std::string& mine) override {
    ++host_calls;
    return {mine, mine};
  }
  void barrier() override { ++host_calls; }
  [[noreturn]] void abort(int code) override { std::exit(code); }

 private:
  void collective() {
    ++float_calls;
    if (!on_emulated_stream()) ++off_stream;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
};

struct Twins {
  TwinChannel* host;
  TwinChannel* channel;
  std::unique_ptr<distributed::EmulatedNcclCommunicator> comm;
};

Twins make_twins() {
  auto host = std::make_unique<TwinChannel>();
  auto channel = std::make_unique<TwinChannel>();
  Twins t{host.get(), channel.get(), nullptr};
  t.comm = std::make_unique<distributed::EmulatedNcclCommunicator>(std::move(host), std::move(channel));
  return t;
}

// Keeps the compute stream busy for `ms` before what the host queues next.
void hold_compute_stream(int ms) {
  emulated_enqueue(EmulatedStreamId::compute, [ms] { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); });
}

TEST(EmulatedNccl, ACollectiveRunsAfterTheComputeBeforeItAndBeforeTheComputeAfterItsWait) {
  AsyncEmulated on;
  Twins t = make_twins();
  const uint64_t syncs = emulated_host_syncs();
  hold_compute_stream(50);
  // Written on the compute stream 50 ms from now: a collective that did not
  // wait for it would double the fresh block's poison (NaN) instead.
  Tensor x = Tensor::full({3}, 1.5, DType::f32, Device::cuda(0));
  auto request = t.comm->all_reduce_async(static_cast<float*>(x.raw_data()), 3, ReduceOp::sum);
  EXPECT_FALSE(request->test());  // queued, not run: the compute stream has not reached it
  request->wait();
  // Queued after wait(): a compute stream that did not wait for the
  // collective (20 ms on the comm stream) would add 1 to 1.5, not to 3.
  Tensor y = add_scalar(x, 1.0f);
  EXPECT_EQ(emulated_host_syncs(), syncs) << "queueing a collective and its wait made the host wait";
  EXPECT_EQ(y.to_float_vector(), std::vector<float>(3, 4.0f));
  EXPECT_TRUE(request->test());
  EXPECT_EQ(t.channel->float_calls, 1);
  EXPECT_EQ(t.channel->off_stream, 0) << "a collective ran on a thread that is not the comm stream's";
  EXPECT_EQ(t.host->float_calls, 0);
}

TEST(EmulatedNccl, BlockingFormsOrderTheComputeStreamAndTheHostReadsThroughACopy) {
  AsyncEmulated on;
  Twins t = make_twins();
  hold_compute_stream(60);  // longer than the collective: one that did not wait would double the poison
  Tensor a = Tensor::full({2}, 3.0, DType::f32, Device::cuda(0));
  t.comm->all_reduce(static_cast<float*>(a.raw_data()), 2, ReduceOp::sum);
  EXPECT_EQ(a.to_float_vector(), std::vector<float>(2, 6.0f));
  Tensor h = Tensor::full({2}, 1.0 + 1.0 / 128, DType::bf16, Device::cuda(0));
  t.comm->all_reduce_async(static_cast<bf16*>(h.raw_data()), 2, ReduceOp::sum)->wait();
  EXPECT_EQ(h.to_float_vector(), std::vector<float>(2, 2.0f + 2.0f / 128));
  Tensor send = Tensor::from_vector({1, 2}, {2}).to(Device::cuda(0)), recv = Tensor::empty({4}, DType::f32, Device::cuda(0));
  t.comm->all_gather(static_cast<float*>(send.raw_data()), static_cast<float*>(recv.raw_data()), 2);
  EXPECT_EQ(recv.to_float_vector(), (std::vector<float>{1, 2, 1, 2}));
  Tensor part = Tensor::empty({2}, DType::f32, Device::cuda(0));
  t.comm->reduce_scatter_async(static_cast<float*>(send.raw_data()), static_cast<float*>(part.raw_data()), 2,
                               ReduceOp::sum)->wait();
  EXPECT_EQ(part.to_float_vector(), (std::vector<float>{2, 4}));
  t.comm->broadcast(static_cast<float*>(send.raw_data()), 2, 0);
  EXPECT_EQ(send.to_float_vector(), (std::vector<float>{1, 2}));
  EXPECT_EQ(t.channel->float_calls, 5);
  EXPECT_EQ(t.channel->off_stream, 0);
}

TEST(EmulatedNccl, HostValuesGoToTheHostCommunicatorAndTheBarrierWaitsForTheCommStream) {
  AsyncEmulated on;
  Twins t = make_twins();
  std::vector<double> d = {1.5};
  t.comm->all_reduce(d.data(), 1, ReduceOp::sum);
  EXPECT_EQ(d[0], 3.0);  // at once, on the host
  EXPECT_EQ(t.comm->all_gather_bytes("x").size(), 2u);
  Tensor x = Tensor::full({1}, 1.0, DType::f32, Device::cuda(0));
  auto request = t.comm->all_reduce_async(static_cast<float*>(x.raw_data()), 1, ReduceOp::sum);
  const auto causes = emulated_host_syncs_by_cause();
  t.comm->barrier();
  EXPECT_TRUE(request->test()) << "the barrier returned before this rank's collectives finished";
  EXPECT_EQ(emulated_host_syncs_by_cause()["communicator barrier"],
            (causes.count("communicator barrier") ? causes.at("communicator barrier") : 0) + 1);
  EXPECT_EQ(t.host->host_calls, 3);
  EXPECT_EQ(t.channel->host_calls, 0);
  EXPECT_STREQ(t.comm->backend(), "emulated-nccl");
  EXPECT_EQ(t.comm->size(), 2);
}

TEST(EmulatedNccl, TheAsynchronousEmulatorNeedsADeviceCommunicatorAndTorchrunStyleRanks) {
  AsyncEmulated on;
  const std::string gloo = test::error_of([] { run::check_device_communicator(Device::cuda(0), 2, "gloo"); });
  EXPECT_TRUE(has(gloo, "train.device=cuda:0 with 2 ranks: the gloo communicator exchanges host memory, not GPU "
                        "tensors (the asynchronous emulated GPU's memory is read on its streams alone); use "
                        "train.dist_backend=nccl (or auto)")) << gloo;
  EXPECT_NO_THROW(run::check_device_communicator(Device::cuda(0), 2, "emulated-nccl"));
  EXPECT_NO_THROW(run::check_device_communicator(Device::cpu(), 2, "gloo"));
  distributed::Launch mpi{"mpirun (Open MPI)", "OMPI_COMM_WORLD_SIZE", 1, 2, 1};
  const std::string under_mpi = test::error_of([&] { distributed::make_communicator("auto", mpi, Device::cuda(0)); });
  EXPECT_TRUE(has(under_mpi, "mpirun (Open MPI) started 2 processes (OMPI_COMM_WORLD_SIZE=2) on the asynchronous "
                             "emulated GPU (CMHA_EMULATE_CUDA=async), whose collectives run over Gloo, not MPI: "
                             "start the ranks with torchrun-style variables")) << under_mpi;
  distributed::Launch torchrun{"torchrun", "WORLD_SIZE", 1, 2, 1};
  const std::string host_memory = test::error_of([&] { distributed::make_communicator("gloo", torchrun, Device::cuda(0)); });
  EXPECT_TRUE(has(host_memory, "train.dist_backend=gloo exchanges host memory, but train.device is cuda:0 (the "
                               "asynchronous emulated GPU)")) << host_memory;
  // The synchronous emulator runs each kernel on the calling thread: a host communicator reads its results.
  set_cuda_emulated(true);
  EXPECT_NO_THROW(run::check_device_communicator(Device::cuda(0), 2, "gloo"));
}

}  // namespace
}  // namespace cmha
