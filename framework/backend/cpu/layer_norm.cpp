// CPU kernels: layer_norm (entries of backend/layer_norm.h).
#include "backend/cpu/kernel_table.h"

namespace cmha::cpu {

backend::LayerNormKernels layer_norm_kernels() { return {}; }

}  // namespace cmha::cpu
