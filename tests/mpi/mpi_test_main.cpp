// The data-parallel test executable: GoogleTest on every rank of the world
// (MPI's under mpirun; Gloo's under tests/mpi/torchrun_like.sh with
// CMHA_TEST_DIST_BACKEND=gloo; with CMHA_TEST_DEVICE=cuda under
// CMHA_EMULATE_CUDA=async, the emulated GPU's emulated-nccl), or with
// --failure-drill DIR a training run whose rank 1 throws after 3 updates
// (tests/mpi/expect_rank_failure.sh checks that the job ends, names the rank
// and leaves a loadable checkpoint).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "distributed/launch.h"
#include "mpi_test_support.h"
#include "train/trainer.h"

namespace cmha::mpitest {

namespace {
std::unique_ptr<distributed::Communicator> g_world;
Device g_device;

int failure_drill(const std::string& dir) {
  distributed::Communicator& comm = world();
  return distributed::run_or_abort(comm, [&] {
    ShardedRegressionTask task(comm.rank(), comm.size(), 4);
    train::TrainerHooks hooks;
    int64_t polls = 0;
    hooks.stop_requested = [&] {
      if (comm.rank() == 1 && ++polls == 4) throw std::runtime_error("injected failure after 3 updates");
      return false;
    };
    train::Trainer(regression_recipe(dir, 100, "train: {save_every: 1}"), task, comm, hooks).run();
    return 0;
  });
}
}  // namespace

distributed::Communicator& world() { return *g_world; }
Device world_device() { return g_device; }

}  // namespace cmha::mpitest

int main(int argc, char** argv) {
  using namespace cmha;
  // The same suites run under mpirun (mpi) and under torchrun-style variables (gloo).
  const char* backend = std::getenv("CMHA_TEST_DIST_BACKEND");
  // And on the asynchronous emulated GPU (CMHA_TEST_DEVICE=cuda, backend auto: emulated-nccl).
  const char* device = std::getenv("CMHA_TEST_DEVICE");
  mpitest::g_device = Device::parse(device ? device : "cpu");
  mpitest::g_world = distributed::make_communicator(backend ? backend : "mpi", distributed::launch_from_environment(),
                                                    mpitest::g_device);
  if (argc == 3 && std::strcmp(argv[1], "--failure-drill") == 0) return mpitest::failure_drill(argv[2]);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
