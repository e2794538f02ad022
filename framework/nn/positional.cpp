#include "nn/positional.h"

#include <cmath>

#include "nn/init.h"

namespace cmha::nn {

Tensor sinusoidal_positions(int64_t length, int64_t dim, int64_t first_position) {
  CMHA_CHECK(dim % 2 == 0 && dim >= 4, "sinusoidal positions need an even width >= 4, got " + std::to_string(dim));
  Tensor pe = Tensor::empty({length, dim});
  float* p = pe.data<float>();
  const int64_t half = dim / 2;
  // fairseq: frequency_i = exp(-i · ln(10000) / (half - 1))
  const double step = std::log(10000.0) / static_cast<double>(half - 1);
  for (int64_t t = 0; t < length; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(t + first_position) * std::exp(-static_cast<double>(i) * step);
      p[t * dim + i] = static_cast<float>(std::sin(angle));
      p[t * dim + half + i] = static_cast<float>(std::cos(angle));
    }
  return pe;
}

LearnedPositions::LearnedPositions(int64_t max_len, int64_t dim, Generator& init_gen, float std) {
  weight = register_parameter("weight", Tensor::empty({max_len, dim}));
  init::trunc_normal_(weight, init_gen, std);
}

Tensor LearnedPositions::forward(int64_t length, int64_t first_position) const {
  CMHA_CHECK(first_position + length <= weight.size(0),
             "learned positions: position " + std::to_string(first_position + length - 1) +
                 " is beyond the table of " + std::to_string(weight.size(0)));
  return weight.slice(0, first_position, first_position + length);
}

}  // namespace cmha::nn
