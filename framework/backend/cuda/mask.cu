// CUDA kernels: mask (entries of backend/mask.h).
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernel_table.h"

namespace cmha::cuda {

namespace {

// out[i, j] = j > i + key_offset over a contiguous b8 [Tq, Tk].
__global__ void causal_kernel(uint8_t* out, int64_t Tk, int64_t n, int64_t key_offset) {
  CMHA_GRID_STRIDE(p, n) {
    const int64_t i = p / Tk, j = p % Tk;
    out[p] = j > i + key_offset ? 1 : 0;
  }
}

void causal(const Tensor& out, int64_t key_offset) {
  out.check_dtype(DType::b8, "mask.causal");
  const int64_t Tk = out.size(1), n = out.numel();
  if (n == 0) return;
  causal_kernel<<<blocks_for(n), kThreads, 0, launch_stream(out)>>>(static_cast<uint8_t*>(out.raw_data()), Tk, n,
                                                                    key_offset);
  check_launch("mask.causal");
}

}  // namespace

backend::MaskKernels mask_kernels() {
  backend::MaskKernels k;
  k.causal = causal;
  return k;
}

}  // namespace cmha::cuda
