#pragma once
// Parameter initialisers. All draw from the counter-based generator, so an
// initialisation is the same for a seed whatever the thread count.
#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace cmha::nn::init {

// U(-a, a) with a = gain·√(6 / (fan_in + fan_out)); fans of a [out, in] matrix.
void xavier_uniform_(Tensor& w, Generator& gen, float gain = 1.0f);
void normal_(Tensor& w, Generator& gen, float mean, float std);
// Normal(mean, std) resampled inside the absolute bounds [a, b] (timm's default ±2).
void trunc_normal_(Tensor& w, Generator& gen, float std = 0.02f, float a = -2.0f, float b = 2.0f);
void uniform_(Tensor& w, Generator& gen, float low, float high);
void zeros_(Tensor& w);
// w [R, R·b]: ones on the R diagonal blocks (row r, columns r·b .. (r+1)·b - 1),
// zeros elsewhere; the identity when w is square.
void block_identity_(Tensor& w);

}  // namespace cmha::nn::init
