// CPU kernels: elementwise (entries of backend/elementwise.h).
#include "backend/cpu/kernel_table.h"

namespace cmha::cpu {

backend::ElementwiseKernels elementwise_kernels() { return {}; }

}  // namespace cmha::cpu
