#pragma once
// Checkpoint averaging (as fairseq's scripts/average_checkpoints.py): the
// element-wise mean of every weight over several checkpoints, in f32. The
// result keeps the last checkpoint's recipe and trainer state and drops the
// optimiser state, so every subcommand accepts it.
#include <string>
#include <vector>

#include "run/checkpoint.h"

namespace cmha::run {

// Every checkpoint must hold the same tensor names and shapes; a difference
// is an error naming both files and the tensor.
Checkpoint average_checkpoints(const std::vector<std::string>& paths);

}  // namespace cmha::run
