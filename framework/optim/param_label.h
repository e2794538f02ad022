#pragma once
// How optimiser errors name a parameter and its layout.
#include <string>

#include "tensor/tensor.h"

namespace cmha::optim {

// "f32[2, 3] on cpu" (describe() without the name, which the label gives).
inline std::string layout(const Tensor& t) {
  if (!t.defined()) return "undefined";
  return std::string(dtype_name(t.dtype())) + shape_str(t.shape()) + " on " + t.device().str() +
         (t.is_contiguous() ? "" : " (non-contiguous)");
}

// "parameter 'encoder.layers.0.ffn.fc1.weight'", or "parameter 3" when unnamed.
inline std::string label(const Tensor& p, size_t i) {
  if (!p.defined() || p.name().empty()) return "parameter " + std::to_string(i);
  return "parameter '" + p.name() + "'";
}

}  // namespace cmha::optim
