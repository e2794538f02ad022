#pragma once
// The CUDA runtime layer: device discovery and raw device memory, under the
// tensor layer's Storage (the kernels are backend/cuda/'s). cuda_runtime.cpp
// is compiled only when cmha is built with CUDA (CMHA_WITH_CUDA); without it
// cuda_device_count() is 0 (device.cpp) and the rest is never called.
#include <cstddef>
#include <string>

namespace cmha {

// Devices visible to this process; 0 (never an error) when there is no
// driver, no GPU, or CUDA_VISIBLE_DEVICES hides them all.
int cuda_device_count();
// "NVIDIA H100 80GB HBM3, 79.1 GiB"; a cmha::Error when `device` is not visible.
std::string cuda_device_description(int device);

// cudaMalloc on `device` (restoring the caller's current device). A bad index,
// no driver or out-of-memory is a cmha::Error naming the CUDA call and error.
void* cuda_alloc(size_t nbytes, int device);
// Never throws (it runs in destructors): a failure is reported on stderr.
void cuda_free(void* p, int device);

}  // namespace cmha
