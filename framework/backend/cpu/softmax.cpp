// CPU kernels: softmax (entries of backend/softmax.h).
#include "backend/cpu/kernel_table.h"

namespace cmha::cpu {

backend::SoftmaxKernels softmax_kernels() { return {}; }

}  // namespace cmha::cpu
