#include "distributed/launch.h"

#ifdef CMHA_WITH_NCCL
#include "distributed/nccl_communicator.h"
#endif

#include <cstdio>
#include <cstdlib>

#include "distributed/emulated_nccl_communicator.h"
#include "tensor/emulated_stream.h"
#include "tensor/error.h"
#ifdef CMHA_WITH_MPI
#include "distributed/mpi_communicator.h"
#endif
#ifdef CMHA_WITH_GLOO
#include "distributed/gloo_communicator.h"
#endif

namespace cmha::distributed {

namespace {

int env_int(const GetEnv& getenv, const char* name, int fallback) {
  const char* text = getenv(name);
  if (!text) return fallback;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  CMHA_CHECK(*text != '\0' && *end == '\0' && v >= 0 && v < (1 << 24),
             std::string("the launcher's environment variable ") + name + "='" + text + "' is not a process count or rank");
  return static_cast<int>(v);
}

struct LauncherVariables {
  const char* name;
  const char *size, *rank, *local_rank;
};

// Most specific first: mpirun inside a Slurm allocation also inherits SLURM_*.
constexpr LauncherVariables kLaunchers[] = {
    {"mpirun (Open MPI)", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"mpiexec (PMI)", "PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID"},
    {"srun (Slurm)", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_LOCALID"},
    {"torchrun", "WORLD_SIZE", "RANK", "LOCAL_RANK"},
};

}  // namespace

Launch launch_from_environment(const GetEnv& getenv) {
  Launch l;
  for (const auto& v : kLaunchers) {
    if (!getenv(v.size)) continue;
    l.launcher = v.name;
    l.size_variable = v.size;
    l.size = env_int(getenv, v.size, 1);
    l.rank = env_int(getenv, v.rank, 0);
    CMHA_CHECK(getenv(v.rank), std::string("the launcher's environment is inconsistent: ") + v.size + " is set but " +
                                   v.rank + " is not (every process needs its rank)");
    l.local_rank = env_int(getenv, v.local_rank, 0);
    CMHA_CHECK(l.size >= 1 && l.rank < l.size, std::string("the launcher's environment is inconsistent: ") + v.rank +
                                                   "=" + std::to_string(l.rank) + " is not below " + v.size + "=" +
                                                   std::to_string(l.size));
    break;
  }
  if (const char* addr = getenv("MASTER_ADDR")) l.master_addr = addr;
  if (getenv("MASTER_PORT")) {
    l.master_port = env_int(getenv, "MASTER_PORT", 0);
    CMHA_CHECK(l.master_port >= 1 && l.master_port <= 65535,
               "MASTER_PORT=" + std::to_string(l.master_port) + " is not a TCP port (1 to 65535)");
  }
  return l;
}

bool gloo_built() {
#ifdef CMHA_WITH_GLOO
  return true;
#else
  return false;
#endif
}

bool mpi_built() {
#ifdef CMHA_WITH_MPI
  return true;
#else
  return false;
#endif
}

Device rank_device(const Launch& launch, int visible_gpus) {
  CMHA_CHECK(visible_gpus > 0, "rank " + std::to_string(launch.rank) + " sees no GPU (no driver, or CUDA_VISIBLE_DEVICES "
                               "hides them all): train.device=cuda needs one GPU per rank");
  if (visible_gpus == 1) return Device::cuda(0);  // one GPU per rank, chosen by the launcher
  CMHA_CHECK(launch.local_rank < visible_gpus,
             "local rank " + std::to_string(launch.local_rank) + " (rank " + std::to_string(launch.rank) + ") has no GPU: " +
                 std::to_string(visible_gpus) + " GPUs are visible on this node; start at most that many ranks per node");
  return Device::cuda(launch.local_rank);
}

namespace {

// The host-memory communicator under the job: MPI's world under an MPI
// launcher, Gloo's otherwise.
std::unique_ptr<Communicator> host_communicator(bool gloo, const Launch& launch, const std::string& started,
                                                double timeout_seconds) {
  if (gloo) {
    CMHA_CHECK(gloo_built(), started + " and train.dist_backend needs Gloo for them, but this cmha was built without "
                                       "it: install libgloo-dev and rebuild (CMake option CMHA_GLOO), or launch with "
                                       "mpirun/srun");
#ifdef CMHA_WITH_GLOO
    return std::make_unique<GlooCommunicator>(launch, timeout_seconds);
#endif
  }
  CMHA_CHECK(mpi_built(), (launch.size > 1 ? started : std::string("train.dist_backend is mpi")) +
                              " but this cmha was built without MPI: install libopenmpi-dev and rebuild "
                              "(CMake option CMHA_MPI), or run a single process without mpirun/srun");
#ifdef CMHA_WITH_MPI
  auto comm = std::make_unique<MpiCommunicator>();
  CMHA_CHECK(launch.size == 1 || comm->size() == launch.size,
             started + " but MPI sees a world of " + std::to_string(comm->size()) +
                 ": the launcher and the MPI library do not match (under Slurm use 'srun --mpi=pmix'; "
                 "with mpirun use the one of the MPI cmha was built with)");
  return comm;
#else
  return nullptr;
#endif
}

// The asynchronous emulated GPU's ranks: its tensors cross on the comm
// stream over a Gloo channel of their own, the host's values over Gloo.
std::unique_ptr<Communicator> emulated_gpu_communicator(const Launch& launch, const std::string& started,
                                                        double timeout_seconds) {
  CMHA_CHECK(!launch.mpi_launcher(),
             started + " on the asynchronous emulated GPU (CMHA_EMULATE_CUDA=async), whose collectives run over "
                       "Gloo, not MPI: start the ranks with torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR, "
                       "MASTER_PORT), or emulate synchronously (CMHA_EMULATE_CUDA=1) under " + launch.launcher);
  CMHA_CHECK(gloo_built(), started + " on the asynchronous emulated GPU, whose collectives run over Gloo, but this "
                                     "cmha was built without it: install libgloo-dev and rebuild (CMake option "
                                     "CMHA_GLOO)");
#ifdef CMHA_WITH_GLOO
  auto host = std::make_unique<GlooCommunicator>(launch, timeout_seconds);
  std::unique_ptr<Communicator> channel = host->open_channel("emulated-nccl");
  return std::make_unique<EmulatedNcclCommunicator>(std::move(host), std::move(channel));
#else
  (void)timeout_seconds;
  return nullptr;
#endif
}

}  // namespace

std::unique_ptr<Communicator> make_communicator(const std::string& backend, const Launch& launch, Device device,
                                                double timeout_seconds) {
  CMHA_CHECK(backend == "auto" || backend == "single" || backend == "mpi" || backend == "gloo" || backend == "nccl",
             "train.dist_backend must be auto, single, mpi, gloo or nccl, not '" + backend + "'");
  CMHA_CHECK(backend != "nccl" || !device.is_cpu(),
             "train.dist_backend=nccl exchanges GPU tensors, but train.device is cpu: use mpi or gloo (or auto)");
  const std::string started = launch.launcher + " started " + std::to_string(launch.size) + " processes (" +
                              launch.size_variable + "=" + std::to_string(launch.size) + ")";
  if (backend == "single" || (backend == "auto" && launch.size == 1)) {
    CMHA_CHECK(launch.size == 1, started + " but train.dist_backend is single: each would train alone and "
                                 "overwrite the others' run directory; use train.dist_backend=auto");
    return std::make_unique<SingleCommunicator>();
  }
  const bool gpu = !device.is_cpu() && !cuda_emulated();
  // The asynchronous emulator's device memory is read on its streams alone, as a GPU's by its kernels.
  const bool emulated_gpu = !device.is_cpu() && cuda_emulated_async();
  CMHA_CHECK(!(backend == "gloo" && (gpu || emulated_gpu)),
             "train.dist_backend=gloo exchanges host memory, but train.device is " + device.str() +
                 (emulated_gpu ? " (the asynchronous emulated GPU)" : "") + ": use nccl (or auto) for GPU tensors");
  CMHA_CHECK(backend != "mpi" || launch.size == 1 || launch.mpi_launcher(),
             started + " without MPI but train.dist_backend is mpi: launch with mpirun or srun, or use gloo (or auto)");
  // Gloo joins the ranks unless an MPI launcher started them and MPI was asked for (or is the default).
  const bool gloo = backend == "gloo" || (!launch.mpi_launcher() && backend != "mpi");
  if (emulated_gpu && (backend == "nccl" || backend == "auto"))
    return emulated_gpu_communicator(launch, started, timeout_seconds);
  if (backend == "nccl" || (backend == "auto" && gpu)) {
#ifdef CMHA_WITH_NCCL
    return std::make_unique<NcclCommunicator>(host_communicator(gloo, launch, started, timeout_seconds), device.index,
                                              timeout_seconds);
#else
    throw Error("train.dist_backend=" + backend + " needs NCCL for the GPU tensors, but this cmha was built without "
                "CUDA: rebuild with the CUDA toolkit and NCCL, or train on CPUs with mpi or gloo");
#endif
  }
  return host_communicator(gloo, launch, started, timeout_seconds);
}

int run_or_abort(Communicator& comm, const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    if (comm.size() == 1) throw;
    std::fprintf(stderr, "cmha: rank %d of %d failed: %s\n", comm.rank(), comm.size(), e.what());
    std::fflush(stderr);
    comm.abort(dynamic_cast<const Error*>(&e) ? 2 : 1);
  }
  return 1;  // not reached (abort ends the process); GCC does not trust [[noreturn]] through a virtual call
}

}  // namespace cmha::distributed
