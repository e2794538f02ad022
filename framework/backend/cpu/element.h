#pragma once
// The floating element types the CPU kernels compute in f32: f32 and bf16.
// A kernel templated on its element types reads through ld() and writes
// through st() (bf16 rounds to nearest even, NaN stays NaN), so one loop
// serves f32, bf16 and mixed tensors (the bf16 activations of train.bf16
// beside the f32 residual stream), with f32 arithmetic inside.
#include "backend/element_types.h"
#include "tensor/dtype.h"

namespace cmha::cpu {

[[gnu::always_inline]] inline float ld(float v) { return v; }
[[gnu::always_inline]] inline float ld(bf16 v) { return bf16_to_float(v); }
[[gnu::always_inline]] inline void st(float& d, float v) { d = v; }
[[gnu::always_inline]] inline void st(bf16& d, float v) { d = float_to_bf16(v); }

// The dispatch on each tensor's dtype is the devices' shared one.
using backend::with_float_type;
using backend::with_float_types;

}  // namespace cmha::cpu
