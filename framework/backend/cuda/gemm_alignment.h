#pragma once
// The alignment cmha declares to cuBLASLt for one operand of a batched GEMM
// (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES). The algorithm is chosen once
// for the whole call, but outer batch dims that did not merge into one
// stride loop on the host over offset pointers: the declared alignment must
// hold for every one of them, not only for the base pointer (a bf16 view
// with an odd outer stride puts every other matrix at 2 bytes), or the
// chosen kernel's vector loads fault (a sticky CUDA error). Header-only, no
// CUDA: the rule is tested on every machine.
#include <cstdint>
#include <vector>

namespace cmha::cuda {

// The largest power of two (at most 256) dividing the address.
inline uint32_t alignment_of_address(uintptr_t a) {
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

// The alignment every pointer base + Σ idx_d · stride_bytes[d] shares: the
// base's, lowered by each outer stride of more than one step (sizes[d] > 1).
inline uint32_t batch_alignment(uintptr_t base, const std::vector<int64_t>& sizes,
                                const std::vector<int64_t>& stride_bytes) {
  uint32_t align = alignment_of_address(base);
  for (size_t d = 0; d < sizes.size() && d < stride_bytes.size(); ++d) {
    if (sizes[d] <= 1) continue;
    const uint32_t s = alignment_of_address(static_cast<uintptr_t>(stride_bytes[d] < 0 ? -stride_bytes[d] : stride_bytes[d]));
    if (s < align) align = s;
  }
  return align;
}

}  // namespace cmha::cuda
