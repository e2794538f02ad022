// CPU kernels: activation (entries of backend/activation.h).
#include "backend/cpu/kernel_table.h"

namespace cmha::cpu {

backend::ActivationKernels activation_kernels() { return {}; }

}  // namespace cmha::cpu
