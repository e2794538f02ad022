#pragma once
// The CUDA kernel table (built only with CMHA_WITH_CUDA), assembled from one
// function per family, each in the backend/cuda/<family>.cu (or .cpp) that
// implements it. An empty entry is an error naming the kernel, never a CPU
// fallback; the CUDA build's tests check that every entry the CPU table fills
// is filled here too (tests/cuda/coverage_test.cpp).
#include "backend/kernels.h"

namespace cmha::cuda {

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

}  // namespace cmha::cuda
