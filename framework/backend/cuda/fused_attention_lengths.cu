// cuDNN SDPA's per-batch sequence lengths from cmha's key-padding mask
// (backend/cuda/fused_attention.h): one thread per batch row.
#include "backend/cuda/common.cuh"
#include "backend/cuda/fused_attention.h"

namespace cmha::cuda {

namespace {

// seq_kv[b] = first j with padding[b, j] (tk when none); seq_q[b] = tq.
__global__ void lengths_kernel(const bool* padding, int32_t* seq_q, int32_t* seq_kv, int64_t batch, int64_t tk,
                               int64_t tq) {
  CMHA_GRID_STRIDE(b, batch) {
    int64_t n = 0;
    while (n < tk && !padding[b * tk + n]) ++n;
    seq_kv[b] = static_cast<int32_t>(n);
    seq_q[b] = static_cast<int32_t>(tq);
  }
}

}  // namespace

void fused_attention_lengths(const Tensor& key_padding, const Tensor& seq_q, const Tensor& seq_kv, int64_t tq) {
  constexpr const char* kName = "attention.fused lengths";
  const bool* pad = device_data<bool>(key_padding, kName);
  int32_t* sq = device_data<int32_t>(seq_q, kName);
  int32_t* skv = device_data<int32_t>(seq_kv, kName);
  const int64_t B = key_padding.size(0), Tk = key_padding.size(1);
  if (B == 0) return;
  lengths_kernel<<<blocks_for(B), kThreads, 0, launch_stream(key_padding)>>>(pad, sq, skv, B, Tk, tq);
  check_launch(kName);
}

}  // namespace cmha::cuda
