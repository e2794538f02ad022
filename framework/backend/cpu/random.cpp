// CPU kernels: random (entries of backend/random.h).
#include "backend/cpu/kernel_table.h"

namespace cmha::cpu {

backend::RandomKernels random_kernels() { return {}; }

}  // namespace cmha::cpu
