#include "backend/kernels.h"

#include <string>

#include "backend/cpu/kernel_table.h"
#include "tensor/error.h"
#ifdef CMHA_WITH_CUDA
#include "backend/cuda/kernel_table.h"
#endif

namespace cmha::backend {

const KernelTable& kernel_table(Device device) {
  switch (device.type) {
    case DeviceType::cpu:
      return cpu::kernel_table();
    case DeviceType::cuda:
#ifdef CMHA_WITH_CUDA
      return cuda::kernel_table();
#else
      throw Error("cannot run on " + device.str() +
                  ": this cmha was built without CUDA (CMHA_CUDA=OFF, or no nvcc and CUDA toolkit found)");
#endif
  }
  throw Error("unknown device type " + std::to_string(static_cast<int>(device.type)));
}

void missing_kernel(const char* entry, Device device) {
  throw Error(std::string(entry) + ": cmha has no " + kernel_table(device).device_name + " kernel for this op yet (asked for " +
              device.str() + "); nothing runs it on another device in its place");
}

}  // namespace cmha::backend
