#pragma once
// Fused attention on CUDA: cuDNN's SDPA (flash attention) forward and
// backward through the vendored cudnn-frontend (fused_attention.cpp, the one
// file of the runtime that includes it). The entries of backend/attention.h:
//   fused_attention_prepare   plan (fused_attention_plan.h) and build the graphs, cached
//   fused_attention_forward   run the forward graph (with the softmax statistics when training)
//   fused_attention_backward  run the backward graph
// Graphs are keyed by everything that shapes them (device, dtype, the sizes,
// the strides of q, k, v, the scale, the masks, the dropout rate and whether
// the statistics are saved) in an LRU cache per process; a key whose build
// failed keeps its failure, so it is tried once. Each device has one
// cudnnHandle bound to its compute stream; the workspace comes from cmha's
// stream-ordered pool (Tensor::empty on the device) per call.
#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/attention.h"

namespace cmha::cuda {

bool fused_attention_prepare(const backend::FusedAttentionArgs& a, std::string& reason);
void fused_attention_forward(const backend::FusedAttentionArgs& a, const Tensor& out, const Tensor& stats,
                             uint64_t seed, uint64_t offset);
void fused_attention_backward(const backend::FusedAttentionArgs& a, const Tensor& out, const Tensor& stats,
                              const Tensor& d_out, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              uint64_t seed, uint64_t offset);

// cuDNN's per-batch lengths from cmha's key padding (fused_attention_lengths.cu):
// seq_q[b] = tq and seq_kv[b] = the index of row b's first padding key (Tk
// when none). key_padding: contiguous b8 [B, Tk]; seq_q, seq_kv: contiguous
// i32 [B, 1, 1, 1]; on one CUDA device.
void fused_attention_lengths(const Tensor& key_padding, const Tensor& seq_q, const Tensor& seq_kv, int64_t tq);

// Graphs built and cache size so far (for tests and the bench).
struct FusedAttentionCacheStats {
  size_t entries = 0;
  size_t built = 0;
};
FusedAttentionCacheStats fused_attention_cache_stats();

}  // namespace cmha::cuda
