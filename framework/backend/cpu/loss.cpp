// CPU kernels: loss (entries of backend/loss.h).
#include "backend/cpu/kernel_table.h"

namespace cmha::cpu {

backend::LossKernels loss_kernels() { return {}; }

}  // namespace cmha::cpu
