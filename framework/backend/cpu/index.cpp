// CPU kernels: index (entries of backend/index.h).
#include "backend/cpu/kernel_table.h"

namespace cmha::cpu {

backend::IndexKernels index_kernels() { return {}; }

}  // namespace cmha::cpu
