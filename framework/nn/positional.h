#pragma once
#include "nn/module.h"

namespace cmha::nn {

// Fixed sinusoidal positions (Vaswani et al.) in fairseq's layout: channel
// i < D/2 holds sin(p·ω_i), channel D/2 + i holds cos(p·ω_i), with
// ω_i = 10000^(-i/(D/2-1)). Returns [length, D] for positions first.. on `device`.
Tensor sinusoidal_positions(int64_t length, int64_t dim, int64_t first_position = 0, Device device = Device::cpu());

// Learned positions: a [max_len, D] parameter named "weight".
class LearnedPositions : public Module {
 public:
  LearnedPositions(int64_t max_len, int64_t dim, Generator& init_gen, float std = 0.02f);
  Tensor forward(int64_t length, int64_t first_position = 0) const;  // -> [length, D]
  Tensor weight;
};

}  // namespace cmha::nn
