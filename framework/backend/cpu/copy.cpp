// CPU kernels: copy (entries of backend/copy.h).
#include "backend/cpu/kernel_table.h"

namespace cmha::cpu {

backend::CopyKernels copy_kernels() { return {}; }

}  // namespace cmha::cpu
