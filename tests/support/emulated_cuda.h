#pragma once
// The asynchronous emulated CUDA device (tensor/emulated_stream.h) for one
// test: cuda:0 over host memory, kernels run later on stream threads.
#include "tensor/emulated_stream.h"

namespace cmha::test {

// The emulator on for this object's scope, in this process.
struct AsyncEmulated {
  AsyncEmulated() { set_cuda_emulated_async(true); }
  ~AsyncEmulated() { set_cuda_emulated_async(false); }
  AsyncEmulated(const AsyncEmulated&) = delete;
  AsyncEmulated& operator=(const AsyncEmulated&) = delete;
};

}  // namespace cmha::test
