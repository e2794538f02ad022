#pragma once
#include <cstdint>
#include <string>

namespace cmha {

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int i) { return {DeviceType::cuda, i}; }
  // "cpu", "cuda", "cuda:1"; anything else is a cmha::Error naming the text.
  static Device parse(const std::string& text);
  std::string str() const;
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool operator==(const Device&) const = default;
};

// Number of CUDA devices visible (0 when cmha was built without CUDA; 1
// when the device is emulated, below).
int cuda_device_count();

// The emulated CUDA device, for testing device code paths on machines
// without a GPU (CMHA_EMULATE_CUDA=1 in the environment, or
// set_cuda_emulated): cuda:0 then exists, its memory is host memory and its
// kernel table is the CPU's, so training on it gives the CPU's numbers bit
// for bit, but host code may touch its memory only inside a kernel-table
// call. Every place that would read GPU memory from the host on a real GPU
// (a missing .to(cpu), a batch left on the CPU, a checkpoint written from
// device tensors) is then an error on any machine, in CI. Real GPUs, when
// present, are hidden while it is on.
bool cuda_emulated();
void set_cuda_emulated(bool on);
// Marks a kernel-table call in progress (backend/profile.h opens one around
// every entry): while any is open, host code may read emulated device memory.
class EmulatedKernelScope {
 public:
  EmulatedKernelScope();
  ~EmulatedKernelScope();
  EmulatedKernelScope(const EmulatedKernelScope&) = delete;
  EmulatedKernelScope& operator=(const EmulatedKernelScope&) = delete;

 private:
  bool counted_;
};
bool inside_emulated_kernel();

// Copies ahead: while a CopyAheadScope is open on a thread, its copies from
// page-locked memory to a GPU (Tensor::pinned().to(cuda)) run beside the work
// the GPU has queued, and the GPU's later work does not wait for them until
// await_copies_ahead(device), which their consumer calls before it first uses
// them; dropping one unused is safe. What a task uses to send the next batch
// while the GPU runs this step. No effect on the CPU or the emulated GPU.
class CopyAheadScope {
 public:
  CopyAheadScope();
  ~CopyAheadScope();
  CopyAheadScope(const CopyAheadScope&) = delete;
  CopyAheadScope& operator=(const CopyAheadScope&) = delete;

 private:
  bool outer_;
};
bool copying_ahead();
void await_copies_ahead(Device device);

}  // namespace cmha
