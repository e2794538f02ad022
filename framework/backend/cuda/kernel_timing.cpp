#include "backend/cuda/kernel_timing.h"

#include <cuda_runtime_api.h>

#include <string>

#include "tensor/cuda_runtime.h"

namespace cmha::cuda {

void* record_timing_event(int device) {
  const std::string what = "cannot time a kernel on cuda:" + std::to_string(device);
  auto stream = static_cast<cudaStream_t>(cuda_stream(device));
  int current = 0;
  cuda_check(cudaGetDevice(&current), "cudaGetDevice", what);
  if (current != device) cuda_check(cudaSetDevice(device), "cudaSetDevice", what);
  cudaEvent_t e = nullptr;
  cuda_check(cudaEventCreate(&e), "cudaEventCreate", what);
  const cudaError_t err = cudaEventRecord(e, stream);
  if (err != cudaSuccess) cudaEventDestroy(e);
  if (current != device) cudaSetDevice(current);
  cuda_check(err, "cudaEventRecord", what);
  return e;
}

double elapsed_ms_and_destroy(void* start, void* end) {
  float ms = 0;
  if (start && end) {
    const auto s = static_cast<cudaEvent_t>(start), e = static_cast<cudaEvent_t>(end);
    if (cudaEventSynchronize(e) != cudaSuccess || cudaEventElapsedTime(&ms, s, e) != cudaSuccess) {
      cudaGetLastError();  // a failed kernel: the stream's next synchronising call reports it
      ms = 0;
    }
  }
  if (start) cudaEventDestroy(static_cast<cudaEvent_t>(start));
  if (end) cudaEventDestroy(static_cast<cudaEvent_t>(end));
  return ms;
}

}  // namespace cmha::cuda
