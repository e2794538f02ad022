#pragma once
// The device a recipe trains on (train.device), checked once at start-up.
#include <vector>

#include "distributed/communicator.h"
#include "run/recipe.h"
#include "tensor/device.h"
#include "tensor/tensor.h"

namespace cmha::run {

// Parses train.device and checks that this build and machine can run on it;
// every problem is one sentence naming train.device and its value.
Device recipe_device(const Recipe& recipe);

// The device's name for a person: "cpu", "cuda:0 (NVIDIA H200, 139.8 GiB,
// compute capability 9.0)", "cuda:0 (emulated: host memory, CPU kernels)".
std::string describe_device(Device device);

// A GPU's memory pool as cmha sees it (tensor/cuda_runtime.h); all zero and
// known=false on the CPU or the emulated device.
struct DeviceMemory {
  bool known = false;
  double reserved_mb = 0, peak_reserved_mb = 0;
  uint64_t pool_growths = 0;  // allocations that took new memory from the driver
};
DeviceMemory device_memory(Device device);

// Data parallelism on GPUs needs a communicator that reads device memory
// (NCCL; emulated-nccl on the asynchronous emulated GPU): with more than one
// rank on a GPU and a host-memory backend, one sentence naming both.
void check_device_communicator(Device device, int world_size, const std::string& backend);

// Rank 0's values of every tensor on every rank, in place, where the tensors
// live (host memory for mpi, GPU memory for nccl); nothing with one rank.
// Checks the device against the communicator first (above).
void broadcast_from_rank0(distributed::Communicator& comm, const std::vector<Tensor>& tensors);

// The same for a device named elsewhere (a command's --device): every
// problem is one sentence starting with `what` (e.g. "--device cuda").
Device checked_device(const std::string& text, const std::string& what);

}  // namespace cmha::run
