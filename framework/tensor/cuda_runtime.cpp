// Plain host code against the CUDA runtime API: built by the C++ compiler,
// so the CUDA part of a build costs no nvcc time until kernels arrive.
#include "tensor/cuda_runtime.h"

#include <cuda_runtime_api.h>

#include <cstdio>

#include "tensor/error.h"

namespace cmha {
namespace {

// Throws "<what>: <call> failed: <cudaGetErrorString> (<cudaError name>)".
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

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // "no driver" and "no device" both mean: none here
    return 0;
  }
  return count;
}

std::string cuda_device_description(int device) {
  const std::string what = "cannot query cuda:" + std::to_string(device);
  check_index(device, what);
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties", what);
  char mem[32];
  std::snprintf(mem, sizeof mem, "%.1f GiB", static_cast<double>(prop.totalGlobalMem) / (1 << 30));
  return std::string(prop.name) + ", " + mem + ", compute capability " + std::to_string(prop.major) + "." +
         std::to_string(prop.minor);
}

void* cuda_alloc(size_t nbytes, int device) {
  const std::string what = "cannot allocate " + std::to_string(nbytes) + " bytes on cuda:" + std::to_string(device);
  check_index(device, what);
  DeviceGuard guard(device, what);
  void* p = nullptr;
  check(cudaMalloc(&p, nbytes), "cudaMalloc", what);
  return p;
}

void cuda_free(void* p, int device) {
  if (!p) return;
  int prev = -1;
  cudaGetDevice(&prev);
  if (prev != device) cudaSetDevice(device);
  cudaError_t err = cudaFree(p);
  if (prev >= 0 && prev != device) cudaSetDevice(prev);
  // At process exit the runtime may be torn down before static tensors die.
  if (err != cudaSuccess && err != cudaErrorCudartUnloading) {
    cudaGetLastError();
    std::fprintf(stderr, "cmha: warning: cudaFree on cuda:%d failed: %s\n", device, cudaGetErrorString(err));
  }
}

}  // namespace cmha
