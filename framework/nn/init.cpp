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
void ones_(Tensor& w) { w.fill_(1.0); }

}  // namespace cmha::nn::init
