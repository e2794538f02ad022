#pragma once
// The CUDA kernel table (built only with CMHA_WITH_CUDA). It fills entry by
// entry as the CUDA kernels land; an empty entry is an error naming the
// kernel, never a CPU fallback.
#include "backend/kernels.h"

namespace cmha::cuda {

const backend::KernelTable& kernel_table();

}  // namespace cmha::cuda
