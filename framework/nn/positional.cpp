#include "nn/positional.h"

#include "backend/kernels.h"
#include "nn/init.h"

namespace cmha::nn {

Tensor sinusoidal_positions(int64_t length, int64_t dim, int64_t first_position, Device device) {
  CMHA_CHECK(dim % 2 == 0 && dim >= 4, "sinusoidal positions need an even width >= 4, got " + std::to_string(dim));
  Tensor pe = Tensor::empty({length, dim}, DType::f32, device);
  CMHA_KERNEL(device, random.sinusoidal_positions)(pe, first_position);
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
