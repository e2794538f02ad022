#pragma once
// The bf16 working copy of an f32 parameter under bf16 autocast: the GEMMs
// of linear layers read bf16 weights while the parameter (the master) stays
// f32. Made once per version of the parameter's values and kept beside the
// parameter (a table keyed by its TensorImpl, every handle of a tied
// parameter sharing it), instead of one conversion per forward:
// the optimiser writes it in the same pass as its update (optim/adam.cpp,
// the kernel's param_bf16), so a training step reads each weight's f32
// values once less. Its bits are the conversion's (round to nearest even),
// whoever wrote it.
//
// The copy is current while the parameter's storage has not been written
// since it was made: every Tensor-API write bumps the storage's version
// (tensor/storage.h), and a host writer through data<T>() must call
// bump_version(), as it must for autograd's saved tensors already. A copy
// goes when its parameter does (at the next copy made).
#include "tensor/tensor.h"

namespace cmha::backend {

// The bf16 copy of `w` (not recorded by autograd): the kept copy when w has
// not been written since it was made, otherwise w converted into it (made
// the first time). A tensor that is not a contiguous f32 leaf gets a fresh
// conversion, kept nowhere.
Tensor bf16_working_copy(const Tensor& w);

// The copy kept on w, current or not (undefined when none): what the
// optimiser overwrites with the bf16 of w's new values in its update pass;
// then mark_bf16_copy_current(w), after w.bump_version().
Tensor bf16_copy_to_rewrite(const Tensor& w);
void mark_bf16_copy_current(const Tensor& w);

}  // namespace cmha::backend
