#include "backend/cpu/kernel_table.h"

namespace cmha::cpu {

const backend::KernelTable& kernel_table() {
  static const backend::KernelTable table = {
      .device_name = "CPU",
      .activation = activation_kernels(),
      .attention = attention_kernels(),
      .buckets = buckets_kernels(),
      .copy = copy_kernels(),
      .dropout = dropout_kernels(),
      .elementwise = elementwise_kernels(),
      .embedding = embedding_kernels(),
      .image = image_kernels(),
      .index = index_kernels(),
      .layer_norm = layer_norm_kernels(),
      .loss = loss_kernels(),
      .mask = mask_kernels(),
      .matmul = matmul_kernels(),
      .optim = optim_kernels(),
      .random = random_kernels(),
      .reduce = reduce_kernels(),
      .softmax = softmax_kernels(),
  };
  return table;
}

}  // namespace cmha::cpu
