// Plain host code against the CUDA runtime API, built by the C++ compiler.
#include "tensor/cuda_runtime.h"

#include <cuda_runtime_api.h>

#include <array>
#include <cstdio>
#include <memory>
#include <mutex>

#include "tensor/device.h"
#include "tensor/error.h"

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

// What cmha keeps per device: its stream, its pool and the pool's counters.
struct DeviceState {
  std::once_flag once;
  cudaStream_t stream = nullptr;
  cudaMemPool_t pool = nullptr;
  std::mutex mutex;  // guards the counters
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

}  // namespace

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
    err = cudaFreeAsync(p, s.stream);
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
