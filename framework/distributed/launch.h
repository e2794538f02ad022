#pragma once
// How a process learns its place in a job: the launcher's environment
// (mpirun, mpiexec, srun), the communicator the recipe asks for, and what
// happens when one rank fails.
#include <functional>
#include <memory>
#include <string>

#include "distributed/communicator.h"
#include "tensor/device.h"

namespace cmha::distributed {

// What the launcher says about this process. A plain start is rank 0 of 1.
struct Launch {
  std::string launcher;       // "mpirun (Open MPI)", "mpiexec (PMI)", "srun (Slurm)", "torchrun"; "" = none
  std::string size_variable;  // the variable that gave the world size, for messages
  int rank = 0, size = 1, local_rank = 0;
  // Rank 0's host and a port for the rendezvous without MPI (MASTER_ADDR,
  // MASTER_PORT: torchrun sets them; under srun or by hand the user does).
  std::string master_addr;
  int master_port = 0;
  // Started by an MPI launcher (mpirun, mpiexec, srun), whose MPI can join the ranks.
  bool mpi_launcher() const { return !launcher.empty() && launcher != "torchrun"; }
};

using GetEnv = std::function<const char*(const char*)>;

// Reads Open MPI's OMPI_COMM_WORLD_*, then MPICH/Intel's PMI_*, then Slurm's
// SLURM_STEP_NUM_TASKS/SLURM_PROCID/SLURM_LOCALID (set by srun, not by sbatch
// alone), then torchrun's WORLD_SIZE/RANK/LOCAL_RANK; and MASTER_ADDR and
// MASTER_PORT. A value that is not a number, a rank outside the size, or
// WORLD_SIZE without RANK is an error naming the variable.
Launch launch_from_environment(const GetEnv& getenv = [](const char* name) -> const char* { return std::getenv(name); });

// True when this build has the MPI backend (CMake found MPI).
bool mpi_built();

// True when this build has the Gloo backend (CMake found Gloo).
bool gloo_built();

// The communicator for train.dist_backend (`auto`, `single`, `mpi`, `gloo`
// or `nccl`): `auto` is `single` for one process, else `nccl` when the
// tensors live on a GPU (`device`), and for CPU tensors `mpi` under an MPI
// launcher and `gloo` under torchrun-style variables. `nccl` bootstraps over
// MPI under an MPI launcher and over Gloo's rendezvous otherwise, and uses
// `device`; a collective (or a rendezvous) unfinished after
// `timeout_seconds` ends the job. Launching inconsistently (several
// processes but `single`, a backend this build lacks, an MPI that sees
// another world size than the launcher, NCCL for CPU tensors, gloo without
// MASTER_ADDR) is an error that says what to do instead. On the
// asynchronous emulated GPU (CMHA_EMULATE_CUDA=async, `device` cuda) `auto`
// and `nccl` give the `emulated-nccl` backend
// (distributed/emulated_nccl_communicator.h): torchrun-style variables and
// Gloo only; an MPI launcher is an error saying so.
std::unique_ptr<Communicator> make_communicator(const std::string& backend, const Launch& launch,
                                                Device device = Device::cpu(), double timeout_seconds = 600);

// The GPU a rank of a launch should use: cuda:local_rank, or cuda:0 when
// each rank sees one GPU of its own (srun --gpus-per-task=1 sets
// CUDA_VISIBLE_DEVICES so). More ranks on a node than its GPUs is an error.
Device rank_device(const Launch& launch, int visible_gpus);

// Runs `body`. In a world of several processes, an exception ends the whole
// job: it prints "cmha: rank R of N failed: <message>" and calls
// comm.abort (exit 2 for a cmha::Error, 1 otherwise), because the other
// ranks may wait in a collective this rank will never join. Alone, it rethrows.
int run_or_abort(Communicator& comm, const std::function<int()>& body);

}  // namespace cmha::distributed
