// CPU kernels: optim (entries of backend/optim.h).
#include "backend/cpu/kernel_table.h"

namespace cmha::cpu {

backend::OptimKernels optim_kernels() { return {}; }

}  // namespace cmha::cpu
