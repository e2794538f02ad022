// Plain host code against the CUDA runtime API, built by the C++ compiler.
#include "tensor/cuda_runtime.h"

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <mutex>
#include <utility>
#include <vector>

#include "tensor/device.h"
#include "tensor/error.h"
#include "tensor/pinned_reads.h"

namespace cmha {
namespace {

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

void check(cudaError_t err, const char* call, const std::string& what) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so later calls are not blamed
  throw Error(what + ": " + call + " failed: " + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + ")");
}

void check_index(int device, const std::string& what) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    check(err, "cudaGetDeviceCount", what + " (no usable CUDA driver or GPU)");
  }
  if (device < 0 || device >= count)
    throw Error(what + ": there is no cuda:" + std::to_string(device) + " (" + std::to_string(count) +
                " CUDA device" + (count == 1 ? "" : "s") + " visible)");
}

// Makes `device` current for the scope and restores the caller's device.
class DeviceGuard {
 public:
  DeviceGuard(int device, const std::string& what) {
    check(cudaGetDevice(&prev_), "cudaGetDevice", what);
    if (prev_ != device) check(cudaSetDevice(device), "cudaSetDevice", what);
  }
  ~DeviceGuard() {
    int now = prev_;
    if (cudaGetDevice(&now) == cudaSuccess && now != prev_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
};

// What cmha keeps per device: its streams, its pool and the pool's counters.
struct DeviceState {
  std::once_flag once;
  cudaStream_t stream = nullptr;       // every kernel, allocation and free
  cudaStream_t copy_stream = nullptr;   // copies ahead (CopyAheadScope), beside the compute stream
  cudaEvent_t compute_point = nullptr;  // where a copy ahead enters the compute stream's order
  cudaEvent_t ahead_done = nullptr;     // after the last copy ahead (the copy stream runs in order)
  std::set<const void*> ahead_unawaited;  // destinations of copies ahead not yet awaited
  cudaMemPool_t pool = nullptr;
  std::mutex copy_mutex;  // guards the copy-ahead fields
  std::mutex mutex;       // guards the counters
  size_t last_reserved = 0;
  size_t peak_reserved = 0;
  uint64_t growths = 0;
  uint64_t allocations = 0;
};

constexpr int kMaxDevices = 64;

DeviceState& state(int device, const std::string& what) {
  // Never destroyed: blocks may be freed by static tensors after main returns.
  static std::array<DeviceState, kMaxDevices>* states = new std::array<DeviceState, kMaxDevices>;
  check_index(device, what);
  if (device >= kMaxDevices) throw Error(what + ": cmha handles at most 64 CUDA devices per process");
  DeviceState& s = (*states)[static_cast<size_t>(device)];
  std::call_once(s.once, [&] {
    DeviceGuard guard(device, what);
    check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", what);
    check(cudaStreamCreateWithFlags(&s.copy_stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", what);
    check(cudaEventCreateWithFlags(&s.compute_point, cudaEventDisableTiming), "cudaEventCreateWithFlags", what);
    check(cudaEventCreateWithFlags(&s.ahead_done, cudaEventDisableTiming), "cudaEventCreateWithFlags", what);
    check(cudaDeviceGetDefaultMemPool(&s.pool, device), "cudaDeviceGetDefaultMemPool", what);
    // Keep freed memory in the pool for the next step instead of handing it
    // back to the driver at every synchronisation.
    uint64_t never = UINT64_MAX;
    check(cudaMemPoolSetAttribute(s.pool, cudaMemPoolAttrReleaseThreshold, &never), "cudaMemPoolSetAttribute",
          what);
  });
  return s;
}

size_t pool_attribute(cudaMemPool_t pool, cudaMemPoolAttr attr) {
  uint64_t value = 0;
  if (cudaMemPoolGetAttribute(pool, attr, &value) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return static_cast<size_t>(value);
}

// Page-locked host blocks by base address, live or cached. A block's `reads`
// are the events of the copies that read it, one per device and stream
// (tensor/pinned_reads.h).
struct PinnedBlock {
  size_t size = 0;
  bool in_use = true;
  PinnedReads<cudaEvent_t> reads;
};

struct PinnedPool {
  std::mutex mutex;
  std::map<uintptr_t, PinnedBlock> blocks;
  std::multimap<size_t, uintptr_t> free_by_size;
  size_t cached_bytes = 0;
};

PinnedPool& pinned_pool() {
  static PinnedPool* pool = new PinnedPool;  // never destroyed, like the device states
  return *pool;
}

size_t pinned_cache_cap() {
  static const size_t cap = [] {
    const char* v = std::getenv("CMHA_PINNED_CACHE_MB");
    char* end = nullptr;
    const long long mb = v ? std::strtoll(v, &end, 10) : 2048;
    return static_cast<size_t>(v && (end == v || *end || mb < 0) ? 2048 : mb) << 20;
  }();
  return cap;
}

// True once every copy that read the block has finished.
bool reads_done(const PinnedBlock& b) {
  for (const auto& read : b.reads.all()) {
    const cudaError_t err = cudaEventQuery(read.event);
    if (err == cudaErrorNotReady) return false;
    if (err != cudaSuccess) cudaGetLastError();  // a failed copy: the stream's next call reports it
  }
  return true;
}

// Frees cached blocks whose copies are done, largest first, until the cache
// holds at most `keep` bytes. Called with the pool's mutex held.
void trim_pinned(PinnedPool& pool, size_t keep) {
  for (auto it = pool.free_by_size.end(); pool.cached_bytes > keep && it != pool.free_by_size.begin();) {
    --it;
    auto block = pool.blocks.find(it->second);
    if (!reads_done(block->second)) continue;
    for (const auto& read : block->second.reads.all()) cudaEventDestroy(read.event);
    cudaFreeHost(reinterpret_cast<void*>(block->first));
    pool.cached_bytes -= block->second.size;
    pool.blocks.erase(block);
    it = pool.free_by_size.erase(it);
  }
}

// The live block holding p, or nullptr. Called with the pool's mutex held.
PinnedBlock* pinned_block_of(PinnedPool& pool, const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  auto it = pool.blocks.upper_bound(at);
  if (it == pool.blocks.begin()) return nullptr;
  --it;
  if (!it->second.in_use || at >= it->first + it->second.size) return nullptr;
  return &it->second;
}

// Records, on `stream`, the end of a copy of device `device` that reads the
// pinned block holding p, and returns the event.
cudaEvent_t record_pinned_read(const void* p, int device, cudaStream_t stream, const std::string& what) {
  PinnedPool& pool = pinned_pool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  PinnedBlock* b = pinned_block_of(pool, p);
  if (!b) throw Error(what + ": the pinned source block was freed during the copy");
  cudaEvent_t& event = b->reads.for_copy(device, stream, [&] {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags", what);
    return e;
  });
  check(cudaEventRecord(event, stream), "cudaEventRecord", what);
  return event;
}

}  // namespace

void* cuda_host_alloc(size_t nbytes) {
  PinnedPool& pool = pinned_pool();
  if (nbytes == 0) nbytes = 1;
  std::lock_guard<std::mutex> lock(pool.mutex);
  // The smallest cached block that fits and is at most twice the size, whose copies are done.
  for (auto it = pool.free_by_size.lower_bound(nbytes); it != pool.free_by_size.end() && it->first / 2 <= nbytes;
       ++it) {
    PinnedBlock& b = pool.blocks.at(it->second);
    if (!reads_done(b)) continue;
    b.in_use = true;
    pool.cached_bytes -= b.size;
    void* p = reinterpret_cast<void*>(it->second);
    pool.free_by_size.erase(it);
    return p;
  }
  void* p = nullptr;
  cudaError_t err = cudaHostAlloc(&p, nbytes, cudaHostAllocPortable);
  if (err != cudaSuccess) {
    cudaGetLastError();
    trim_pinned(pool, 0);  // give the cached blocks back and try once more
    err = cudaHostAlloc(&p, nbytes, cudaHostAllocPortable);
  }
  check(err, "cudaHostAlloc", "cannot page-lock " + mib(nbytes) + " of host memory for copies to the GPU");
  pool.blocks[reinterpret_cast<uintptr_t>(p)].size = nbytes;
  return p;
}

void cuda_host_free(void* p) {
  if (!p) return;
  PinnedPool& pool = pinned_pool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  auto it = pool.blocks.find(reinterpret_cast<uintptr_t>(p));
  if (it == pool.blocks.end() || !it->second.in_use) {
    std::fprintf(stderr, "cmha: warning: cuda_host_free of a pointer that is not a live pinned block\n");
    return;
  }
  it->second.in_use = false;
  pool.free_by_size.emplace(it->second.size, it->first);
  pool.cached_bytes += it->second.size;
  trim_pinned(pool, pinned_cache_cap());
}

bool cuda_host_pinned(const void* p) {
  PinnedPool& pool = pinned_pool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  return pinned_block_of(pool, p) != nullptr;
}

void cuda_host_await_reads(const void* p) {
  std::vector<cudaEvent_t> events;
  {
    PinnedPool& pool = pinned_pool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    const PinnedBlock* b = pinned_block_of(pool, p);
    if (!b) return;
    for (const auto& read : b->reads.all()) events.push_back(read.event);
  }
  // A block's events live as long as the block, which its owner keeps.
  for (cudaEvent_t e : events) check(cudaEventSynchronize(e), "cudaEventSynchronize", "waiting for a pinned block's copies");
}

void cuda_check(int status, const char* call, const std::string& what) {
  check(static_cast<cudaError_t>(status), call, what);
}

int cuda_device_count() {
  if (cuda_emulated()) return 1;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // "no driver" and "no device" both mean: none here
    return 0;
  }
  return count;
}

CudaDeviceInfo cuda_device_info(int device) {
  const std::string what = "cannot query cuda:" + std::to_string(device);
  check_index(device, what);
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties", what);
  return {prop.name, prop.totalGlobalMem, prop.major, prop.minor, prop.multiProcessorCount};
}

std::string cuda_device_description(int device) {
  const CudaDeviceInfo info = cuda_device_info(device);
  char mem[32];
  std::snprintf(mem, sizeof mem, "%.1f GiB", static_cast<double>(info.total_bytes) / (1 << 30));
  return info.name + ", " + mem + ", compute capability " + std::to_string(info.major) + "." +
         std::to_string(info.minor);
}

void* cuda_stream(int device) { return state(device, "cannot use cuda:" + std::to_string(device)).stream; }

void* cuda_alloc(size_t nbytes, int device) {
  const std::string what = "cannot allocate " + mib(nbytes) + " on cuda:" + std::to_string(device);
  DeviceState& s = state(device, what);
  DeviceGuard guard(device, what);
  void* p = nullptr;
  if (nbytes == 0) nbytes = 1;  // a valid, unique pointer for an empty tensor
  cudaError_t err = cudaMallocFromPoolAsync(&p, nbytes, s.pool, s.stream);
  if (err == cudaErrorMemoryAllocation) {
    // The pool may hold freed blocks of other sizes: wait for the stream,
    // give them back to the driver and try once more, as PyTorch's caching
    // allocator does before it reports out of memory.
    cudaGetLastError();
    cudaStreamSynchronize(s.stream);
    cudaMemPoolTrimTo(s.pool, 0);
    err = cudaMallocFromPoolAsync(&p, nbytes, s.pool, s.stream);
  }
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    const size_t held = pool_attribute(s.pool, cudaMemPoolAttrUsedMemCurrent);
    throw Error("out of memory on cuda:" + std::to_string(device) + ": asked for " + mib(nbytes) + ", " +
                mib(free_bytes) + " free of " + mib(total_bytes) + " (cmha's tensors hold " + mib(held) +
                "); lower data.batch_tokens (or data.batch_size) and raise train.update_freq to keep the "
                "effective batch, or turn on train.bf16");
  }
  check(err, "cudaMallocFromPoolAsync", what);
  const size_t reserved = pool_attribute(s.pool, cudaMemPoolAttrReservedMemCurrent);
  std::lock_guard<std::mutex> lock(s.mutex);
  ++s.allocations;
  if (reserved > s.last_reserved) ++s.growths;
  s.last_reserved = reserved;
  if (reserved > s.peak_reserved) s.peak_reserved = reserved;
  return p;
}

void cuda_free(void* p, int device) {
  if (!p) return;
  cudaError_t err = cudaSuccess;
  try {
    DeviceState& s = state(device, "cannot free on cuda:" + std::to_string(device));
    {
      // A copy ahead dropped before anyone awaited it: the free (and the
      // block's next owner) comes after the copy.
      std::lock_guard<std::mutex> lock(s.copy_mutex);
      if (s.ahead_unawaited.erase(p)) err = cudaStreamWaitEvent(s.stream, s.ahead_done, 0);
    }
    if (err == cudaSuccess) err = cudaFreeAsync(p, s.stream);
  } catch (const Error& e) {
    std::fprintf(stderr, "cmha: warning: %s\n", e.what());
    return;
  }
  // At process exit the runtime may be torn down before static tensors die.
  if (err != cudaSuccess && err != cudaErrorCudartUnloading) {
    cudaGetLastError();
    std::fprintf(stderr, "cmha: warning: cudaFreeAsync on cuda:%d failed: %s\n", device, cudaGetErrorString(err));
  }
}

void cuda_copy_to_device(void* dst, const void* src, size_t nbytes, int device) {
  if (nbytes == 0) return;
  const std::string what = "cannot copy " + mib(nbytes) + " to cuda:" + std::to_string(device);
  DeviceState& s = state(device, what);
  if (cuda_host_pinned(src)) {
    DeviceGuard guard(device, what);
    if (copying_ahead()) {
      // On the copy stream, after what the compute stream has queued (dst is
      // a block it has just allocated) and beside what it queues next, which
      // waits for it only from cuda_await_copies_ahead on.
      std::lock_guard<std::mutex> lock(s.copy_mutex);
      check(cudaEventRecord(s.compute_point, s.stream), "cudaEventRecord", what);
      check(cudaStreamWaitEvent(s.copy_stream, s.compute_point, 0), "cudaStreamWaitEvent", what);
      check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, s.copy_stream), "cudaMemcpyAsync", what);
      record_pinned_read(src, device, s.copy_stream, what);
      check(cudaEventRecord(s.ahead_done, s.copy_stream), "cudaEventRecord", what);
      s.ahead_unawaited.insert(dst);
      return;
    }
    // In the compute stream's order; the host goes on at once, and the block
    // is not handed out again before the copy has read it.
    check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, s.stream), "cudaMemcpyAsync", what);
    record_pinned_read(src, device, s.stream, what);
    return;
  }
  // From pageable memory the call returns once the bytes are staged, so the
  // caller may free or overwrite `src` right away.
  check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, s.stream), "cudaMemcpyAsync", what);
}

void cuda_copy_to_host(void* dst, const void* src, size_t nbytes, int device) {
  if (nbytes == 0) return;
  const std::string what = "cannot copy " + mib(nbytes) + " from cuda:" + std::to_string(device);
  DeviceState& s = state(device, what);
  check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, s.stream), "cudaMemcpyAsync", what);
  check(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize", what + " (an earlier kernel failed)");
}

void cuda_await_copies_ahead(int device) {
  const std::string what = "cannot wait for the copies ahead to cuda:" + std::to_string(device);
  DeviceState& s = state(device, what);
  std::lock_guard<std::mutex> lock(s.copy_mutex);
  if (s.ahead_unawaited.empty()) return;
  DeviceGuard guard(device, what);
  check(cudaStreamWaitEvent(s.stream, s.ahead_done, 0), "cudaStreamWaitEvent", what);
  s.ahead_unawaited.clear();
}

void cuda_synchronize(int device, const std::string& what) {
  DeviceState& s = state(device, what);
  check(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize", what);
}

CudaMemoryStats cuda_memory_stats(int device) {
  DeviceState& s = state(device, "cannot read the memory of cuda:" + std::to_string(device));
  CudaMemoryStats out;
  out.reserved_bytes = pool_attribute(s.pool, cudaMemPoolAttrReservedMemCurrent);
  out.used_bytes = pool_attribute(s.pool, cudaMemPoolAttrUsedMemCurrent);
  std::lock_guard<std::mutex> lock(s.mutex);
  out.peak_reserved_bytes = s.peak_reserved;
  out.pool_growths = s.growths;
  out.allocations = s.allocations;
  return out;
}

}  // namespace cmha
