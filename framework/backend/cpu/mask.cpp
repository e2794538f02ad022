// CPU kernels: mask (entries of backend/mask.h).
#include "backend/cpu/kernel_table.h"

namespace cmha::cpu {

namespace {

void causal(const Tensor& out, int64_t key_offset) {
  const int64_t Tq = out.size(0), Tk = out.size(1);
  bool* f = out.data<bool>("mask.causal");
  for (int64_t i = 0; i < Tq; ++i)
    for (int64_t j = 0; j < Tk; ++j) f[i * Tk + j] = j > i + key_offset;
}

}  // namespace

backend::MaskKernels mask_kernels() {
  backend::MaskKernels k;
  k.causal = causal;
  return k;
}

}  // namespace cmha::cpu
