// CPU kernels: reduce (entries of backend/reduce.h).
#include "backend/cpu/kernel_table.h"

namespace cmha::cpu {

backend::ReduceKernels reduce_kernels() { return {}; }

}  // namespace cmha::cpu
