#pragma once
// The CPU kernel table, assembled from one function per family (each in the
// backend/cpu/<family>.cpp that implements it).
#include "backend/kernels.h"

namespace cmha::cpu {

const backend::KernelTable& kernel_table();

backend::ActivationKernels activation_kernels();
backend::AttentionKernels attention_kernels();
backend::BucketsKernels buckets_kernels();
backend::CopyKernels copy_kernels();
backend::DropoutKernels dropout_kernels();
backend::ElementwiseKernels elementwise_kernels();
backend::EmbeddingKernels embedding_kernels();
backend::ImageKernels image_kernels();
backend::IndexKernels index_kernels();
backend::LayerNormKernels layer_norm_kernels();
backend::LossKernels loss_kernels();
backend::MaskKernels mask_kernels();
backend::MatmulKernels matmul_kernels();
backend::OptimKernels optim_kernels();
backend::RandomKernels random_kernels();
backend::ReduceKernels reduce_kernels();
backend::SoftmaxKernels softmax_kernels();

}  // namespace cmha::cpu
