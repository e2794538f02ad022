// Run under `mpirun -np 2`: the MPI collectives, and data-parallel training
// against one process with the whole batch (weights after several updates,
// with and without overlap and accumulation, and resumes across world sizes).
#include <gtest/gtest.h>

#ifdef CMHA_WITH_NCCL
#include "distributed/nccl_api.h"
#endif

#include <filesystem>

#include "mpi_test_support.h"
#include "run/checkpoint.h"
#include "support/check.h"
#include "train/trainer.h"

using namespace cmha;
using namespace cmha::mpitest;
namespace fs = std::filesystem;

namespace {

// Every parameter, in order, as one vector.
std::vector<float> weights_of(train::Task& task) {
  std::vector<float> all;
  for (auto& [name, p] : task.model().named_parameters()) {
    const auto v = p.to_float_vector();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

// Trains a fresh task of `batch` samples per rank on `comm` (resuming from `dir` when asked).
std::vector<float> train_weights(distributed::Communicator& comm, const std::string& dir, int64_t batch, int64_t epochs,
                                 const std::string& extra = "", bool resume = false) {
  ShardedRegressionTask task(comm.rank(), comm.size(), batch);
  train::TrainerHooks hooks;
  hooks.resume = resume;
  const run::Recipe recipe = regression_recipe(dir, epochs, extra);
  train::Trainer(recipe, task, comm, hooks).run();
  return weights_of(task);
}

// The same run on one process alone (every rank computes it, no communication).
std::vector<float> single_process_weights(int64_t batch, int64_t epochs, const std::string& extra = "") {
  distributed::SingleCommunicator alone;
  const std::string dir = test::temp_dir("dp_single");
  const auto w = train_weights(alone, dir, batch, epochs, extra);
  fs::remove_all(dir);
  return w;
}

::testing::AssertionResult weights_close(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size() << " weights";
  for (size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i] - b[i]) > tol * (1.0f + std::abs(b[i])))
      return ::testing::AssertionFailure() << "weight " << i << ": " << a[i] << " vs " << b[i];
  return ::testing::AssertionSuccess();
}

// `values` (as `dtype`) where the world's collectives act on tensors.
Tensor on_world_device(const std::vector<float>& values, DType dtype = DType::f32) {
  return Tensor::from_vector(values, {static_cast<int64_t>(values.size())}).to(dtype).to(world_device());
}
float* f32(const Tensor& t) { return static_cast<float*>(t.raw_data()); }

// Rank 0's vector on every rank, to check the ranks agree.
std::vector<float> rank0(const std::vector<float>& v) {
  const Tensor t = on_world_device(v);
  world().broadcast(f32(t), v.size(), 0);
  return t.to_float_vector();
}

}  // namespace

#ifdef CMHA_WITH_NCCL
// NCCL's bootstrap over MPI needs no GPU: rank 0's unique id reaches every
// rank byte for byte (what ncclCommInitRank then needs on each).
TEST(Collectives, NcclUniqueIdIsTheSameOnEveryRank) {
  std::string id;
  try {
    id = distributed::exchange_nccl_unique_id(world());
  } catch (const Error& e) {
    GTEST_SKIP() << "NCCL cannot start here: " << e.what();
  }
  ASSERT_EQ(id.size(), 128u);
  EXPECT_NE(id, std::string(128, '\0'));
  const std::vector<std::string> all = world().all_gather_bytes(id);
  for (const std::string& other : all) EXPECT_EQ(other, id);
}
#endif

TEST(Collectives, ReduceBroadcastGatherScatter) {
  distributed::Communicator& c = world();
  ASSERT_EQ(c.size(), 2) << "run under mpirun -np 2";
  const float r = static_cast<float>(c.rank());
  // Float buffers where the world's tensors live; results read through a copy.
  Tensor a = on_world_device({r + 1, 10 * r});
  c.all_reduce(f32(a), 2, distributed::ReduceOp::sum);
  EXPECT_EQ(a.to_float_vector(), (std::vector<float>{3, 10}));
  std::vector<double> d = {r + 1.0};  // doubles are host memory on every backend
  c.all_reduce(d.data(), d.size(), distributed::ReduceOp::average);
  EXPECT_EQ(d[0], 1.5);
  Tensor async = on_world_device({r, 2 * r});
  auto req = c.all_reduce_async(f32(async), 2, distributed::ReduceOp::average);
  req->wait();
  EXPECT_EQ(async.to_float_vector(), (std::vector<float>{0.5f, 1.0f}));
  EXPECT_TRUE(req->test());  // once the result has been read, the collective is done
  // bf16 values, the sum rounded to bf16: (1 + 2^-7) + 2^-8 needs 8 mantissa bits and ties to even, 1 + 2^-6.
  Tensor h = on_world_device({c.rank() == 0 ? 1.0f + 1.0f / 128 : 1.0f / 256, -3.0f}, DType::bf16);
  c.all_reduce_async(static_cast<bf16*>(h.raw_data()), 2, distributed::ReduceOp::sum)->wait();
  EXPECT_EQ(h.to_float_vector(), (std::vector<float>{1.0f + 1.0f / 64, -6.0f}));
  Tensor m = on_world_device({r + 1}, DType::bf16);
  c.all_reduce_async(static_cast<bf16*>(m.raw_data()), 1, distributed::ReduceOp::average)->wait();
  EXPECT_EQ(m.item(), 1.5f);

  Tensor b = on_world_device({r + 7});
  c.broadcast_async(f32(b), 1, 1)->wait();
  EXPECT_EQ(b.item(), 8);
  Tensor gathered = on_world_device(std::vector<float>(4, -1)), gathered_async = on_world_device(std::vector<float>(4, -1));
  const Tensor mine = on_world_device({r, r + 0.5f});
  c.all_gather(f32(mine), f32(gathered), 2);
  EXPECT_EQ(gathered.to_float_vector(), (std::vector<float>{0, 0.5f, 1, 1.5f}));
  c.all_gather_async(f32(mine), f32(gathered_async), 2)->wait();
  EXPECT_EQ(gathered_async.to_float_vector(), gathered.to_float_vector());
  // [rank r sends (r, r+1 | r+2, r+3)]: rank 0 gets 0+1, 1+2; rank 1 gets 2+3, 3+4.
  const Tensor blocks = on_world_device({r, r + 1, r + 2, r + 3});
  Tensor part = on_world_device({-1, -1}), part_async = on_world_device({-1, -1});
  c.reduce_scatter(f32(blocks), f32(part), 2, distributed::ReduceOp::sum);
  EXPECT_EQ(part.to_float_vector(), c.rank() == 0 ? (std::vector<float>{1, 3}) : (std::vector<float>{5, 7}));
  c.reduce_scatter_async(f32(blocks), f32(part_async), 2, distributed::ReduceOp::average)->wait();
  EXPECT_EQ(part_async.to_float_vector(),
            c.rank() == 0 ? (std::vector<float>{0.5f, 1.5f}) : (std::vector<float>{2.5f, 3.5f}));
  const auto bytes = c.all_gather_bytes(std::string(static_cast<size_t>(3 * c.rank()), 'x'));
  EXPECT_EQ(bytes, (std::vector<std::string>{"", "xxx"}));
  c.barrier();
}

TEST(DataParallel, TwoRanksOfBatchBMatchOneRankOfBatch2B) {
  const std::string dir = shared_temp_dir("dp_match");
  const auto two = train_weights(world(), dir, 4, 2);  // 2 epochs × 8 updates
  const auto one = single_process_weights(8, 2);
  EXPECT_TRUE(weights_close(two, one, 2e-5f));
  EXPECT_EQ(two, rank0(two)) << "the ranks' weights differ";
  world().barrier();
  if (world().is_main()) fs::remove_all(dir);
}

TEST(DataParallel, Bf16GradientExchangeStaysCloseToF32) {
  const std::string dir = shared_temp_dir("dp_bf16");
  const auto two = train_weights(world(), dir, 4, 2, "train: {dist_grad_dtype: bf16}");
  const auto one = single_process_weights(8, 2);
  EXPECT_TRUE(weights_close(two, one, 2e-2f));
  EXPECT_FALSE(weights_close(two, one, 1e-7f)) << "bf16 rounding left every weight as in f32: was the exchange in bf16?";
  EXPECT_EQ(two, rank0(two)) << "the ranks' weights differ";
  world().barrier();
  if (world().is_main()) fs::remove_all(dir);
}

TEST(DataParallel, OverlappedBucketsEqualTheExchangeAfterBackward) {
  const std::string a = shared_temp_dir("dp_overlap"), b = shared_temp_dir("dp_no_overlap");
  const auto overlapped = train_weights(world(), a, 4, 1, "train: {dist_overlap: true}");
  const auto after = train_weights(world(), b, 4, 1, "train: {dist_overlap: false}");
  EXPECT_EQ(overlapped, after);  // the same sums of two floats: bit-identical
  world().barrier();
  if (world().is_main()) fs::remove_all(a), fs::remove_all(b);
}

TEST(DataParallel, AccumulationCommunicatesOnlyTheLastMicroBatch) {
  // 2 ranks × 2 micro-batches of 2 = one update of 8 samples, as 1 rank × 8.
  const std::string dir = shared_temp_dir("dp_accumulate");
  const auto two = train_weights(world(), dir, 2, 2, "train: {update_freq: 2}");
  const auto one = single_process_weights(8, 2);
  EXPECT_TRUE(weights_close(two, one, 2e-5f));
  world().barrier();
  if (world().is_main()) fs::remove_all(dir);
}

TEST(DataParallel, ResumeOnTheSameWorldIsBitIdentical) {
  const std::string straight = shared_temp_dir("dp_straight"), split = shared_temp_dir("dp_split");
  const auto whole = train_weights(world(), straight, 4, 3, "train: {save_every: 3}");
  train_weights(world(), split, 4, 2, "train: {save_every: 3}");
  world().barrier();  // rank 0 writes the checkpoints
  // Resume from update 15, in the middle of epoch 2: data position and RNG per rank.
  if (world().is_main()) EXPECT_TRUE(fs::remove(split + "/checkpoint_16.safetensors"));
  world().barrier();
  const auto resumed = train_weights(world(), split, 4, 3, "train: {save_every: 3}", true);
  EXPECT_EQ(resumed, whole);
  world().barrier();
  if (world().is_main()) fs::remove_all(straight), fs::remove_all(split);
}

TEST(DataParallel, ATwoRankCheckpointResumesOnOneRank) {
  const std::string dir = shared_temp_dir("dp_resume_one");
  train_weights(world(), dir, 4, 2, "train: {save_every: 3}");
  world().barrier();
  if (world().is_main()) {
    // Resume mid-epoch (update 15 of 16, epoch 2) on one process with the whole batch.
    EXPECT_TRUE(fs::remove(dir + "/checkpoint_16.safetensors"));
    const run::Checkpoint c = run::load_checkpoint(dir + "/checkpoint_15.safetensors");
    EXPECT_EQ(c.trainer.at("world_size"), 2);
    EXPECT_EQ(c.trainer.at("ranks").size(), 2u);
    EXPECT_EQ(c.trainer.at("bucket_order").size(), 4u);  // a resume on 2 ranks exchanges the same buckets
    distributed::SingleCommunicator alone;
    const auto resumed = train_weights(alone, dir, 8, 3, "train: {save_every: 3}", true);
    EXPECT_TRUE(weights_close(resumed, single_process_weights(8, 3), 2e-5f));
    fs::remove_all(dir);
  }
  world().barrier();
}
