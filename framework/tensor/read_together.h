#pragma once
// Reads many small device tensors on the host with one wait per dtype
// instead of one each: the trainer's losses, correct counts, gradient norms
// and range-check answers of the updates since its last log line
// (train.log_every). On a GPU each read drains the device's queue, so a step
// that read its own values would make the host wait in every step.
#include <vector>

#include "tensor/tensor.h"

namespace cmha {

// CPU copies of xs, in order, each of its tensor's shape and dtype (a CPU
// tensor is returned as it is). The tensors of one device and dtype are
// copied into one device buffer on that device's stream and that buffer is
// read once: one host wait per (device, dtype).
std::vector<Tensor> read_together(const std::vector<Tensor>& xs);

}  // namespace cmha
