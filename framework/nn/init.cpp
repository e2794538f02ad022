#include "nn/init.h"

#include <cmath>

#include "autograd/engine.h"

namespace cmha::nn::init {

void xavier_uniform_(Tensor& w, Generator& gen, float gain) {
  CMHA_CHECK(w.dim() >= 2, "xavier_uniform_: needs a matrix, got " + w.describe());
  // PyTorch's convention: fan_in = size(1)·receptive, fan_out = size(0)·receptive.
  const int64_t receptive = w.numel() / (w.size(0) * w.size(1));
  const double fan_in = static_cast<double>(w.size(1) * receptive), fan_out = static_cast<double>(w.size(0) * receptive);
  const float a = gain * static_cast<float>(std::sqrt(6.0 / (fan_in + fan_out)));
  cmha::uniform_(w, gen, -a, a);
}

void normal_(Tensor& w, Generator& gen, float mean, float std) { cmha::normal_(w, gen, mean, std); }

void trunc_normal_(Tensor& w, Generator& gen, float std, float a, float b) {
  cmha::trunc_normal_(w, gen, 0.0f, std, a, b);
}

void uniform_(Tensor& w, Generator& gen, float low, float high) { cmha::uniform_(w, gen, low, high); }

void zeros_(Tensor& w) { w.fill_(0.0); }

void block_identity_(Tensor& w) {
  CMHA_CHECK(w.dim() == 2 && w.size(0) > 0 && w.size(1) % w.size(0) == 0,
             "block_identity_: needs a matrix [R, R·b], got " + w.describe());
  const int64_t R = w.size(0), b = w.size(1) / R;
  // Without a loop over elements: in a [R, (R+1)·b] buffer, row r starts r·b
  // elements further on than row r of w does, so the buffer's first b columns,
  // read back flat as w's shape, land exactly on w's diagonal blocks.
  Tensor buf = Tensor::zeros({R, (R + 1) * b}, DType::f32, w.device());
  buf.slice(1, 0, b).fill_(1.0);
  w.copy_(buf.view({R * (R + 1) * b}).slice(0, 0, R * R * b).view({R, R * b}));
}

}  // namespace cmha::nn::init
