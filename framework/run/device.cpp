#include "run/device.h"

#include "backend/kernels.h"
#include "distributed/launch.h"
#include "tensor/emulated_stream.h"
#include "tensor/error.h"
#ifdef CMHA_WITH_CUDA
#include "tensor/cuda_runtime.h"
#endif

namespace cmha::run {

Device recipe_device(const Recipe& recipe) {
  const std::string text = recipe.string("train.device");
  Device device = checked_device(text, "train.device=" + text);
  // `cuda` in a job of several ranks: each rank its own GPU (an explicit cuda:N is taken as given).
  if (text == "cuda" && !cuda_emulated()) {
    const distributed::Launch launch = distributed::launch_from_environment();
    if (launch.size > 1) {
      device = distributed::rank_device(launch, cuda_device_count());
      backend::require_device(device, "train.device=cuda on rank " + std::to_string(launch.rank));
    }
  }
  return device;
}

Device checked_device(const std::string& text, const std::string& what) {
  Device device;
  try {
    device = Device::parse(text);
  } catch (const Error& e) {
    throw Error(what + ": " + e.what());
  }
  backend::require_device(device, what);
  return device;
}

std::string describe_device(Device device) {
  if (device.is_cpu()) return "cpu";
  if (cuda_emulated()) return device.str() + " (emulated: host memory, CPU kernels)";
#ifdef CMHA_WITH_CUDA
  return device.str() + " (" + cuda_device_description(device.index) + ")";
#else
  return device.str();
#endif
}

DeviceMemory device_memory(Device device) {
  DeviceMemory m;
#ifdef CMHA_WITH_CUDA
  if (device.is_cpu() || cuda_emulated()) return m;
  const CudaMemoryStats s = cuda_memory_stats(device.index);
  m.known = true;
  m.reserved_mb = static_cast<double>(s.reserved_bytes) / (1 << 20);
  m.peak_reserved_mb = static_cast<double>(s.peak_reserved_bytes) / (1 << 20);
  m.pool_growths = s.pool_growths;
#else
  (void)device;
#endif
  return m;
}

void check_device_communicator(Device device, int world_size, const std::string& backend) {
  // The synchronous emulator runs each kernel on the thread that calls it: a
  // host communicator reads its results. The asynchronous one, like a GPU, does not.
  const bool host_reads_device = cuda_emulated() && !cuda_emulated_async();
  if (device.is_cpu() || world_size == 1 || host_reads_device || backend == "nccl" || backend == "emulated-nccl")
    return;
  throw Error("train.device=" + device.str() + " with " + std::to_string(world_size) + " ranks: the " + backend +
              " communicator exchanges host memory, not GPU tensors" +
              (cuda_emulated_async() ? " (the asynchronous emulated GPU's memory is read on its streams alone)" : "") +
              "; use train.dist_backend=nccl (or auto)");
}

void broadcast_from_rank0(distributed::Communicator& comm, const std::vector<Tensor>& tensors) {
  if (comm.size() == 1 || tensors.empty()) return;
  check_device_communicator(tensors.front().device(), comm.size(), comm.backend());
  for (const Tensor& t : tensors) {
    comm.broadcast(t.device().is_cpu() ? t.data<float>() : static_cast<float*>(t.raw_data()),
                   static_cast<size_t>(t.numel()), 0);
    t.bump_version();  // written in place: a kept bf16 copy (backend/working_copy.h) is stale
  }
}

}  // namespace cmha::run
