#include "backend/cuda/kernel_table.h"

namespace cmha::cuda {

const backend::KernelTable& kernel_table() {
  static const backend::KernelTable table = [] {
    backend::KernelTable t;
    t.device_name = "CUDA";
    // One line per family, as each family's kernels land.
    t.activation = activation_kernels();
    t.attention = attention_kernels();
    t.buckets = buckets_kernels();
    t.copy = copy_kernels();
    t.dropout = dropout_kernels();
    t.elementwise = elementwise_kernels();
    t.embedding = embedding_kernels();
    t.image = image_kernels();
    t.index = index_kernels();
    t.layer_norm = layer_norm_kernels();
    t.loss = loss_kernels();
    t.mask = mask_kernels();
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
