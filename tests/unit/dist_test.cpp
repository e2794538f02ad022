// Data parallelism without MPI: the launcher's environment, the choice of
// communicator and its errors, and the gradient buckets against a simulated
// world of two ranks holding the same gradients.
#include <gtest/gtest.h>

#include "run/device.h"

#include <cstdlib>
#include <map>

#include "autograd/ops.h"
#include "distributed/launch.h"
#include "support/check.h"
#include "support/text.h"
#include "train/gradient_buckets.h"

using namespace cmha;
using test::env_of;
using test::error_of;

namespace {


using cmha::test::has;

// World size 2 in one process: the "other rank" holds the same values, so a
// sum doubles. Counts the collectives; asynchronous ones finish at wait().
class TwinCommunicator final : public distributed::Communicator {
 public:
  int launched = 0, completed = 0, gathers = 0;
  int rank() const override { return 0; }
  int size() const override { return 2; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  const char* backend() const override { return "twin"; }
  void all_reduce(float* d, size_t n, distributed::ReduceOp op) override {
    if (op == distributed::ReduceOp::sum) for (size_t i = 0; i < n; ++i) d[i] *= 2;
  }
  void all_reduce(double* d, size_t n, distributed::ReduceOp op) override {
    if (op == distributed::ReduceOp::sum) for (size_t i = 0; i < n; ++i) d[i] *= 2;
  }
  std::unique_ptr<distributed::Request> all_reduce_async(float* d, size_t n, distributed::ReduceOp op) override {
    ++launched;
    struct Pending : distributed::Request {
      TwinCommunicator* c;
      float* d;
      size_t n;
      distributed::ReduceOp op;
      bool done = false;
      bool test() override { return done; }
      void wait() override {
        if (done) return;
        c->all_reduce(d, n, op);
        ++c->completed;
        done = true;
      }
    };
    auto r = std::make_unique<Pending>();
    r->c = this, r->d = d, r->n = n, r->op = op;
    return r;
  }
  std::unique_ptr<distributed::Request> all_reduce_async(bf16* d, size_t n, distributed::ReduceOp op) override {
    ++launched;
    ++completed;
    if (op == distributed::ReduceOp::sum) distributed::sum_bf16(d, d, d, n);
    return std::make_unique<distributed::CompletedRequest>();
  }
  void broadcast(float*, size_t, int) override {}
  std::unique_ptr<distributed::Request> broadcast_async(float*, size_t, int) override { return nullptr; }
  void all_gather(const float*, float*, size_t) override {}
  std::unique_ptr<distributed::Request> all_gather_async(const float*, float*, size_t) override { return nullptr; }
  void reduce_scatter(const float*, float*, size_t, distributed::ReduceOp) override {}
  std::unique_ptr<distributed::Request> reduce_scatter_async(const float*, float*, size_t, distributed::ReduceOp) override {
    return nullptr;
  }
  std::vector<std::string> all_gather_bytes(const std::string& mine) override {
    ++gathers;
    return {mine, mine};
  }
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::exit(code); }
};

// Three parameters used as sum((x·a + b)·c) and one never used.
struct TinyModel {
  Tensor a = test::random_tensor({4, 3}, 1, -1, 1, true), b = test::random_tensor({3}, 2, -1, 1, true),
         c = test::random_tensor({3}, 3, -1, 1, true), unused = test::random_tensor({5}, 4, -1, 1, true);
  std::vector<Tensor> params() const { return {a, b, c, unused}; }
  void backward(uint64_t seed) const {
    Tensor x = test::random_tensor({2, 4}, seed);
    sum(mul(add(matmul(x, a), b), c)).backward();
  }
};

std::vector<std::vector<float>> grads_of(const TinyModel& m) {
  return {m.a.grad().to_float_vector(), m.b.grad().to_float_vector(), m.c.grad().to_float_vector()};
}

}  // namespace

TEST(Launch, ReadsOpenMpiSlurmAndPmiVariables) {
  distributed::Launch l = distributed::launch_from_environment(
      env_of({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
              {"SLURM_STEP_NUM_TASKS", "8"}}));
  EXPECT_EQ(l.launcher, "mpirun (Open MPI)");
  EXPECT_EQ(l.size, 4);
  EXPECT_EQ(l.rank, 2);
  EXPECT_EQ(l.local_rank, 1);
  l = distributed::launch_from_environment(env_of({{"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_LOCALID", "0"}}));
  EXPECT_EQ(l.launcher, "srun (Slurm)");
  EXPECT_EQ(l.rank, 1);
  l = distributed::launch_from_environment(env_of({{"PMI_SIZE", "3"}, {"PMI_RANK", "0"}}));
  EXPECT_EQ(l.launcher, "mpiexec (PMI)");
  EXPECT_EQ(l.size, 3);
  l = distributed::launch_from_environment(env_of({{"SLURM_NTASKS", "4"}, {"SLURM_PROCID", "0"}}));  // sbatch without srun
  EXPECT_EQ(l.launcher, "");
  EXPECT_EQ(l.size, 1);
}

TEST(Launch, BadVariablesAreNamed) {
  EXPECT_TRUE(has(error_of([] { distributed::launch_from_environment(env_of({{"OMPI_COMM_WORLD_SIZE", "two"}})); }),
                  "OMPI_COMM_WORLD_SIZE='two' is not a process count or rank"));
  EXPECT_TRUE(has(error_of([] {
                    distributed::launch_from_environment(env_of({{"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "2"}}));
                  }),
                  "SLURM_PROCID=2 is not below SLURM_STEP_NUM_TASKS=2"));
}

TEST(Launch, GpuTensorsNeedACommunicatorThatReadsGpuMemory) {
  EXPECT_TRUE(has(error_of([] { run::check_device_communicator(Device::cuda(0), 2, "mpi"); }),
                  "train.device=cuda:0 with 2 ranks: the mpi communicator exchanges host memory, not GPU "
                  "tensors; use train.dist_backend=nccl (or auto)"));
  EXPECT_NO_THROW(run::check_device_communicator(Device::cuda(0), 2, "nccl"));
  EXPECT_NO_THROW(run::check_device_communicator(Device::cuda(0), 1, "single"));
  EXPECT_NO_THROW(run::check_device_communicator(Device::cpu(), 2, "mpi"));
}

TEST(Launch, TheCommunicatorFollowsTheLaunchOrSaysWhyNot) {
  EXPECT_STREQ(distributed::make_communicator("auto", distributed::Launch{})->backend(), "single");
  EXPECT_STREQ(distributed::make_communicator("single", distributed::Launch{})->backend(), "single");
  distributed::Launch two{"mpirun (Open MPI)", "OMPI_COMM_WORLD_SIZE", 1, 2, 1};
  const std::string single = error_of([&] { distributed::make_communicator("single", two); });
  EXPECT_TRUE(has(single, "mpirun (Open MPI) started 2 processes (OMPI_COMM_WORLD_SIZE=2) but "
                          "train.dist_backend is single")) << single;
  EXPECT_TRUE(has(error_of([] { distributed::make_communicator("ring", distributed::Launch{}); }),
                  "train.dist_backend must be auto, single, mpi, gloo or nccl, not 'ring'"));
  EXPECT_TRUE(has(error_of([] { distributed::make_communicator("nccl", distributed::Launch{}); }),
                  "train.dist_backend=nccl exchanges GPU tensors, but train.device is cpu"));
  // One GPU per rank: cuda:local_rank, or cuda:0 when the launcher shows each rank one GPU.
  EXPECT_EQ(distributed::rank_device(two, 8), Device::cuda(1));
  EXPECT_EQ(distributed::rank_device(two, 1), Device::cuda(0));
  EXPECT_TRUE(has(error_of([&] { distributed::rank_device(two, 0); }), "rank 1 sees no GPU"));
  distributed::Launch fifth{"srun (Slurm)", "SLURM_STEP_NUM_TASKS", 4, 8, 4};
  EXPECT_TRUE(has(error_of([&] { distributed::rank_device(fifth, 4); }),
                  "local rank 4 (rank 4) has no GPU: 4 GPUs are visible on this node"));
  if (!distributed::mpi_built()) {
    const std::string no_mpi = error_of([&] { distributed::make_communicator("auto", two); });
    EXPECT_TRUE(has(no_mpi, "started 2 processes (OMPI_COMM_WORLD_SIZE=2) but this cmha was built without MPI"))
        << no_mpi;
  }
}

TEST(Launch, RunOrAbortRethrowsWhenAlone) {
  distributed::SingleCommunicator alone;
  EXPECT_EQ(distributed::run_or_abort(alone, [] { return 7; }), 7);
  EXPECT_TRUE(has(error_of([&] { distributed::run_or_abort(alone, []() -> int { throw Error("boom"); }); }), "boom"));
}

TEST(Launch, TrainLaunchedAsTwoRanksWithTheSingleBackendExitsTwo) {
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  ::setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  const auto r = test::run_cmha("train train.dist_backend=single");
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "train.dist_backend is single")) << r.output;
}

TEST(SingleCommunicator, CollectivesAreTheIdentityOrACopy) {
  distributed::SingleCommunicator c;
  std::vector<float> a = {1, 2}, out(2);
  c.all_reduce(a.data(), 2, distributed::ReduceOp::average);
  EXPECT_EQ(a, (std::vector<float>{1, 2}));
  EXPECT_TRUE(c.all_reduce_async(a.data(), 2, distributed::ReduceOp::sum)->test());
  c.all_gather(a.data(), out.data(), 2);
  EXPECT_EQ(out, a);
  std::vector<float> part(2);
  c.reduce_scatter_async(a.data(), part.data(), 2, distributed::ReduceOp::sum)->wait();
  EXPECT_EQ(part, a);
  EXPECT_EQ(c.all_gather_bytes("x"), std::vector<std::string>{"x"});
}

TEST(GradientBuckets, FullBucketsGoOutDuringTheBackwardPass) {
  TinyModel m;
  m.backward(10);
  const auto local = grads_of(m);
  for (Tensor p : m.params()) p.zero_grad();

  TwinCommunicator twin;
  // 16 bytes: in reverse registration order {unused}, {c, b}, {a}.
  train::GradientBuckets buckets(m.params(), twin, {16, true});
  EXPECT_EQ(buckets.buckets(), 3);
  buckets.arm();
  m.backward(10);
  EXPECT_EQ(twin.launched, 0);  // the first bucket waits for `unused`, which never comes
  buckets.finish(0.25f);
  EXPECT_EQ(twin.launched, 3);
  EXPECT_EQ(twin.completed, 3);
  EXPECT_EQ(twin.gathers, 1);  // rank 0's ready order c, b, a (then unused) becomes the bucket order
  const auto reduced = grads_of(m);
  for (size_t k = 0; k < local.size(); ++k)
    for (size_t i = 0; i < local[k].size(); ++i) EXPECT_FLOAT_EQ(reduced[k][i], local[k][i] * 2 * 0.25f);
  EXPECT_FALSE(m.unused.grad().defined());  // no rank had a gradient: none, as with one process

  // Now {c, b}, {a}, {unused}: the first two leave during the backward pass.
  for (Tensor p : m.params()) p.zero_grad();
  buckets.arm();
  m.backward(10);
  EXPECT_EQ(twin.launched, 5);
  EXPECT_EQ(twin.completed, 3);
  buckets.finish(0.25f);
  EXPECT_EQ(twin.launched, 6);
  EXPECT_EQ(twin.gathers, 1);
  EXPECT_EQ(grads_of(m), reduced);
}

TEST(GradientBuckets, Bf16ExchangeRoundsBeforeAndAfterTheSum) {
  TinyModel m;
  m.backward(10);
  const auto local = grads_of(m);
  for (Tensor p : m.params()) p.zero_grad();
  TwinCommunicator twin;
  train::BucketOptions o{16, true};
  o.bf16 = true;
  train::GradientBuckets buckets(m.params(), twin, o);
  buckets.arm();
  m.backward(10);
  buckets.finish(0.25f);
  EXPECT_EQ(twin.completed, 3);
  const auto reduced = grads_of(m);
  int inexact = 0;
  for (size_t k = 0; k < local.size(); ++k)
    for (size_t i = 0; i < local[k].size(); ++i) {
      // Each rank's gradient rounded to bf16, the sum of the two rounded again, widened, scaled in f32.
      const float g = bf16_to_float(float_to_bf16(local[k][i]));
      const float expected = bf16_to_float(float_to_bf16(g + g)) * 0.25f;
      EXPECT_EQ(reduced[k][i], expected) << k << "," << i;
      inexact += reduced[k][i] != local[k][i] * 2 * 0.25f;
    }
  EXPECT_GT(inexact, 0);  // the rounding is real: some gradient differs from the f32 exchange
  EXPECT_FALSE(m.unused.grad().defined());  // the flags survive bf16 (0 and 1 are exact)
}

TEST(GradientBuckets, WithoutOverlapEverythingGoesAfterTheBackwardPass) {
  TinyModel m;
  TwinCommunicator twin;
  train::GradientBuckets buckets(m.params(), twin, {1 << 20, false});
  EXPECT_EQ(buckets.buckets(), 1);
  buckets.arm();
  m.backward(10);
  EXPECT_EQ(twin.launched, 0);
  buckets.finish(1.0f);
  EXPECT_EQ(twin.launched, 1);
}

TEST(GradientBuckets, SmallFirstBucketAndEighthsOfASmallModel) {
  // 24 parameters of 1 MiB each (a 24 MiB model, smaller than one default
  // 25 MB bucket): eighths of it, 3 MiB, after a first bucket of 1 MiB; one
  // bucket of the whole model would leave nothing to overlap with the backward pass.
  std::vector<Tensor> params;
  for (int i = 0; i < 24; ++i) params.push_back(Tensor::zeros({1 << 18}).set_requires_grad(true));
  TwinCommunicator twin;
  train::BucketOptions defaults;
  EXPECT_EQ(train::GradientBuckets(params, twin, defaults).buckets(), 1 + 8 - 1 + 1);  // 1 + 23/3 rounded up
  // A big model keeps the configured size: 240 MiB in 25 MiB buckets after the first.
  std::vector<Tensor> big;
  for (int i = 0; i < 240; ++i) big.push_back(Tensor::zeros({1 << 18}).set_requires_grad(true));
  EXPECT_EQ(train::GradientBuckets(big, twin, defaults).buckets(), 1 + 10);  // 239 MiB in buckets of 25 MiB
}

TEST(GradientBuckets, AccumulatedMicroBatchesAreExchangedOnceAfterTheLast) {
  TinyModel m;
  m.backward(10);
  m.backward(11);
  const auto local = grads_of(m);
  for (Tensor p : m.params()) p.zero_grad();

  TwinCommunicator twin;
  train::GradientBuckets buckets(m.params(), twin, {16, true});
  m.backward(10);  // not armed: accumulates only
  EXPECT_EQ(twin.launched, 0);
  buckets.arm();
  m.backward(11);
  buckets.finish(1.0f);
  EXPECT_EQ(twin.launched, 3);
  const auto reduced = grads_of(m);
  for (size_t k = 0; k < local.size(); ++k)
    for (size_t i = 0; i < local[k].size(); ++i) EXPECT_FLOAT_EQ(reduced[k][i], local[k][i] * 2);
}

TEST(GradientBuckets, TheAgreedOrderTravelsThroughCheckpoints) {
  TinyModel m;
  TwinCommunicator twin;
  train::GradientBuckets first(m.params(), twin, {16, true});
  EXPECT_TRUE(first.agreed_order().empty());
  first.arm();
  m.backward(10);
  first.finish(1.0f);
  EXPECT_EQ(first.agreed_order(), (std::vector<int64_t>{2, 1, 0, 3}));  // c, b, a ready; then unused

  train::GradientBuckets resumed(m.params(), twin, {16, true});
  resumed.use_order(first.agreed_order());
  EXPECT_EQ(resumed.agreed_order(), first.agreed_order());
  const int gathers = twin.gathers;
  for (Tensor p : m.params()) p.zero_grad();
  resumed.arm();
  m.backward(10);
  EXPECT_EQ(twin.launched, 3 + 2);  // {c, b} and {a} during the backward pass, as the first run's second update
  resumed.finish(1.0f);
  EXPECT_EQ(twin.gathers, gathers);  // nothing left to agree on
  EXPECT_TRUE(has(error_of([&] { resumed.use_order({0, 1, 1, 3}); }),
                  "the checkpoint's gradient bucket order is not an order of this model's 4 parameters"));
}
