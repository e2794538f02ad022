#pragma once
// The emulated CUDA device's kernel table (tensor/device.h): the CPU's
// kernels, run on the calling thread (CMHA_EMULATE_CUDA=1) or queued on the
// asynchronous emulator's compute stream (CMHA_EMULATE_CUDA=async,
// tensor/emulated_stream.h).
#include "backend/kernels.h"

namespace cmha::backend {

const KernelTable& emulated_cuda_table(bool async);

}  // namespace cmha::backend
