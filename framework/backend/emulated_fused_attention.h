#pragma once
// The emulated CUDA device's fused attention: see emulated_fused_attention.cpp.
#include "backend/attention.h"

namespace cmha::backend {

// Fills k's fused_prepare, fused_forward and fused_backward with the stand-in.
void use_emulated_fused_attention(AttentionKernels& k);

}  // namespace cmha::backend
