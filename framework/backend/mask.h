#pragma once
// Kernel-table entries: mask (see backend/kernels.h). Each entry's comment says
// what it computes, the dtypes and layouts it accepts, and who allocates what.
#include <cstdint>

#include "tensor/tensor.h"

namespace cmha::backend {

struct MaskKernels {
};

}  // namespace cmha::backend
