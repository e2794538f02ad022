#pragma once
// Every entry of the kernel table (backend/kernels.h) as one list, for code
// that must visit all of them: the CUDA build's check that its table fills
// what the CPU's does, and the parity suite's coverage check (tests/cuda).
// X(family, entry) is called once per entry; kernel_table.cpp checks at
// compile time that the list counts every function pointer of every family.
#define CMHA_KERNEL_ENTRIES(X) \
  X(activation, relu) \
  X(activation, relu_backward) \
  X(activation, gelu) \
  X(activation, gelu_backward) \
  X(attention, collaborative_queries) \
  X(attention, collaborative_queries_backward) \
  X(attention, fused_prepare) \
  X(attention, fused_forward) \
  X(attention, fused_backward) \
  X(buckets, pack) \
  X(buckets, unpack) \
  X(buckets, scale) \
  X(copy, copy) \
  X(copy, fill) \
  X(copy, iota) \
  X(copy, transfer) \
  X(dropout, forward) \
  X(dropout, backward) \
  X(elementwise, binary) \
  X(elementwise, unary) \
  X(embedding, forward) \
  X(embedding, backward) \
  X(image, prepare) \
  X(index, find_out_of_range) \
  X(index, masked_fill) \
  X(index, gather) \
  X(index, gather_backward) \
  X(layer_norm, forward) \
  X(layer_norm, backward) \
  X(loss, count_targets) \
  X(loss, count_correct) \
  X(loss, cross_entropy_forward) \
  X(loss, cross_entropy_backward) \
  X(loss, soft_cross_entropy_forward) \
  X(loss, soft_cross_entropy_backward) \
  X(loss, reduce_rows) \
  X(mask, causal) \
  X(matmul, matmul) \
  X(optim, adam_step) \
  X(optim, sgd_step) \
  X(optim, ema_update) \
  X(optim, swap) \
  X(optim, sum_squares) \
  X(optim, all_finite) \
  X(optim, scale) \
  X(optim, clip_grad_norm) \
  X(random, uniform) \
  X(random, normal) \
  X(random, trunc_normal) \
  X(random, sinusoidal_positions) \
  X(reduce, sum) \
  X(reduce, max) \
  X(reduce, max_backward) \
  X(reduce, target_rank) \
  X(softmax, forward) \
  X(softmax, backward)
