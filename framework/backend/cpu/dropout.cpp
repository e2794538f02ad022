// CPU kernels: dropout (entries of backend/dropout.h).
#include "backend/cpu/kernel_table.h"

namespace cmha::cpu {

backend::DropoutKernels dropout_kernels() { return {}; }

}  // namespace cmha::cpu
