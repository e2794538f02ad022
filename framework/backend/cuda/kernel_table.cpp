#include "backend/cuda/kernel_table.h"

namespace cmha::cuda {

const backend::KernelTable& kernel_table() {
  static const backend::KernelTable table = [] {
    backend::KernelTable t;
    t.device_name = "CUDA";
    // One line per family, as each family's kernels land.
    t.activation = activation_kernels();
    t.copy = copy_kernels();
    t.elementwise = elementwise_kernels();
    t.embedding = embedding_kernels();
    t.index = index_kernels();
    t.mask = mask_kernels();
    return t;
  }();
  return table;
}

}  // namespace cmha::cuda
