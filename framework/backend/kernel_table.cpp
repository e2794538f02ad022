#include "backend/kernels.h"

#include <atomic>
#include <cstring>
#include <string>

#include "backend/cpu/kernel_table.h"
#include "backend/emulated_cuda_table.h"
#include "backend/kernel_device.h"
#include "backend/kernel_entries.h"
#include "tensor/cuda_runtime.h"
#include "tensor/emulated_stream.h"
#include "tensor/error.h"
#ifdef CMHA_WITH_CUDA
#include "backend/cuda/kernel_table.h"
#endif

namespace cmha::backend {

// The entry list names every function pointer of the table: a new entry
// that is not added to backend/kernel_entries.h fails here.
#define CMHA_COUNT_ENTRY(family, entry) +1
static_assert(sizeof(KernelTable) ==
                  sizeof(const char*) + (0 CMHA_KERNEL_ENTRIES(CMHA_COUNT_ENTRY)) * sizeof(void (*)()),
              "backend/kernel_entries.h must list every entry of KernelTable");
#undef CMHA_COUNT_ENTRY

std::vector<std::string> kernel_entry_names() {
  std::vector<std::string> names;
#define CMHA_NAME_ENTRY(family, entry) names.push_back(#family "." #entry);
  CMHA_KERNEL_ENTRIES(CMHA_NAME_ENTRY)
#undef CMHA_NAME_ENTRY
  return names;
}

std::vector<std::string> empty_entries(const KernelTable& table) {
  std::vector<std::string> empty;
#define CMHA_EMPTY_ENTRY(family, entry) \
  if (table.family.entry == nullptr) empty.push_back(#family "." #entry);
  CMHA_KERNEL_ENTRIES(CMHA_EMPTY_ENTRY)
#undef CMHA_EMPTY_ENTRY
  return empty;
}


namespace {
thread_local Device t_last_device;
}  // namespace
Device last_kernel_table_device() { return t_last_device; }

const KernelTable& kernel_table(Device device) {
  t_last_device = device;
  switch (device.type) {
    case DeviceType::cpu:
      return cpu::kernel_table();
    case DeviceType::cuda:
      if (cuda_emulated()) return emulated_cuda_table(cuda_emulated_async());
#ifdef CMHA_WITH_CUDA
      return cuda::kernel_table();
#else
      throw Error("cannot run on " + device.str() +
                  ": this cmha was built without CUDA (CMHA_CUDA=OFF, or no nvcc and CUDA toolkit found)");
#endif
  }
  throw Error("unknown device type " + std::to_string(static_cast<int>(device.type)));
}

void require_device(Device device, const std::string& what) {
  if (device.is_cpu()) return;
  if (cuda_emulated()) {
    CMHA_CHECK(device.index == 0, what + ": the emulated CUDA device (CMHA_EMULATE_CUDA=1) is cuda:0 alone");
    return;
  }
#ifndef CMHA_WITH_CUDA
  throw Error(what + ": this cmha was built without CUDA (CMHA_CUDA=OFF, or no nvcc and CUDA toolkit were found "
                     "when it was configured); use cpu");
#else
  const int count = cuda_device_count();
  CMHA_CHECK(count > 0, what + ": no CUDA device is visible on this machine (no GPU or driver, or "
                                "CUDA_VISIBLE_DEVICES hides them); use cpu");
  CMHA_CHECK(device.index < count, what + ": there is no " + device.str() + " (" + std::to_string(count) +
                                       " CUDA device" + (count == 1 ? "" : "s") + " visible)");
  // Parameters reach the GPU through copy.transfer: without it nothing can run there.
  CMHA_CHECK(kernel_table(device).copy.transfer != nullptr,
             what + ": this version of cmha has no CUDA kernels yet, so nothing can run on " + device.str() +
                 "; use cpu");
#endif
}

namespace {
std::atomic<bool> tf32_on{false};
}  // namespace
void set_f32_matmul_tf32(bool on) { tf32_on.store(on, std::memory_order_relaxed); }
bool f32_matmul_tf32() { return tf32_on.load(std::memory_order_relaxed); }

void missing_kernel(const char* entry, Device device) {
  throw Error(std::string(entry) + ": cmha has no " + kernel_table(device).device_name + " kernel for this op yet (asked for " +
              device.str() + "); nothing runs it on another device in its place");
}

}  // namespace cmha::backend
