#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tensor/device.h"

namespace cmha {

// A block of device memory shared by every tensor that views it.
// CPU blocks are 64-byte aligned (one cache line, one AVX-512 vector).
//
// The version counts the in-place writes into the block made through the
// Tensor API (copy_, fill_, the random fills, the optimiser, EMA, clipping
// and gradient-bucket kernels): autograd records it when an op saves a tensor
// for its backward and refuses to run that backward if it changed
// (autograd/engine.h, SavedTensor). One counter per block, as in PyTorch, so
// a write through any view of the block counts. Host code writing through
// data<T>() is not seen: such writers must call Tensor::bump_version().
class Storage {
  struct Borrow {};
  Storage(Borrow, void* data, size_t nbytes, Device device)
      : data_(data), nbytes_(nbytes), owned_(false), host_(device.is_cpu() || cuda_emulated()), device_(device) {}

 public:
  static constexpr size_t kAlignment = 64;
  Storage(size_t nbytes, Device device);
  // A CPU block in page-locked memory (cuda_host_alloc) when a real GPU is
  // present, so that a copy of it to the GPU does not make the host wait;
  // an ordinary CPU block otherwise (no CUDA build, no GPU, emulated GPU).
  static std::shared_ptr<Storage> pinned_host(size_t nbytes);
  // Memory owned elsewhere (another library's buffer, a device pointer):
  // viewed, never freed. The owner keeps it alive while tensors view it.
  static std::shared_ptr<Storage> borrowed(void* data, size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  // Host memory: a CPU block, or a block of the emulated CUDA device (device.h).
  bool on_host() const { return host_; }
  bool pinned() const { return pinned_; }
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  size_t capacity_ = 0;  // CPU: the block's real size (a cached block may be larger than asked)
  bool owned_ = true;
  bool host_ = true;
  bool pinned_ = false;
  Device device_;
  std::atomic<uint64_t> version_{0};  // relaxed: a count, ordered by whatever orders the writes
};

// Freed CPU blocks of 1 MiB or more are kept, by size class, and handed out
// again (the smallest cached block of at least the size asked, and at most
// twice it):
// a training step allocates the same sizes every time, and first-touching
// fresh pages costs more than the arithmetic on them (a 32 MiB buffer: ~150
// ms of page faults against a 50 ms GEMM on these machines). Blocks of 2 MiB
// or more are 2 MiB aligned and ask for transparent huge pages. The cache is
// capped (CMHA_CPU_CACHE_MB, default 4096), never holds more than the peak of
// live tensor bytes less the live bytes now (so live plus cached stays within
// the largest step so far), and is off under AddressSanitizer, so
// that use-after-free stays detectable.
size_t cached_cpu_bytes();
void release_cached_cpu_memory();

// The peak resident memory of this process so far, in MiB (getrusage's ru_maxrss).
double process_peak_rss_mb();
// The most bytes CPU tensors held at once so far (their blocks' sizes, the
// cache's free blocks not counted), in MiB: what the peak resident memory
// would be without the block cache and the allocator's own slack.
double peak_cpu_tensor_mb();

}  // namespace cmha
