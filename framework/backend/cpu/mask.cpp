// CPU kernels: mask (entries of backend/mask.h).
#include "backend/cpu/kernel_table.h"

namespace cmha::cpu {

backend::MaskKernels mask_kernels() { return {}; }

}  // namespace cmha::cpu
