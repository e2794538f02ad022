#include "backend/cuda/kernel_table.h"

namespace cmha::cuda {

const backend::KernelTable& kernel_table() {
  static const backend::KernelTable table = [] {
    backend::KernelTable t;
    t.device_name = "CUDA";
    // One line per family, as each family's kernels land.
    t.buckets = buckets_kernels();
    t.dropout = dropout_kernels();
    t.layer_norm = layer_norm_kernels();
    t.loss = loss_kernels();
    t.matmul = matmul_kernels();
    t.optim = optim_kernels();
    t.random = random_kernels();
    t.reduce = reduce_kernels();
    t.softmax = softmax_kernels();
    return t;
  }();
  return table;
}

}  // namespace cmha::cuda
