// CPU kernels: matmul (entries of backend/matmul.h).
#include "backend/cpu/kernel_table.h"

namespace cmha::cpu {

backend::MatmulKernels matmul_kernels() { return {}; }

}  // namespace cmha::cpu
