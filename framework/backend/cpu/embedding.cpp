// CPU kernels: embedding (entries of backend/embedding.h).
#include "backend/cpu/kernel_table.h"

namespace cmha::cpu {

backend::EmbeddingKernels embedding_kernels() { return {}; }

}  // namespace cmha::cpu
