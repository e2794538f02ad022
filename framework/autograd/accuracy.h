#pragma once
// Top-1 accuracy's count on the device (autograd/loss.cpp): the trainer keeps
// it there until its log cadence (train/update_tally.h), so that a GPU step
// never waits for its predictions.
#include <cstdint>

#include "tensor/tensor.h"

namespace cmha {

// Correct top-1 predictions: the rows i with target[i] != ignore_index and
// pred[i] == target[i]; pred and target integer ids of one numel on one
// device -> i64 [] there (not differentiable; nothing is read on the host).
Tensor count_correct(const Tensor& pred, const Tensor& target, int64_t ignore_index);

}  // namespace cmha
