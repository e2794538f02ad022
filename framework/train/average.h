#pragma once
// Checkpoint averaging (as fairseq's scripts/average_checkpoints.py): the
// element-wise mean of every weight over several checkpoints, in f32. The
// result keeps the last checkpoint's recipe and trainer state and drops the
// optimiser state, so every subcommand accepts it.
#include <string>
#include <vector>

#include "train/checkpoint.h"

namespace cmha::train {

// Every checkpoint must hold the same tensor names and shapes; a difference
// is an error naming both files and the tensor.
Checkpoint average_checkpoints(const std::vector<std::string>& paths);

// Every update checkpoint (checkpoint_<update>.safetensors) of a run
// directory, oldest first; none when the directory does not exist.
std::vector<std::string> update_checkpoints(const std::string& run_dir);

// The last n update checkpoints (checkpoint_<update>.safetensors) of a run
// directory, oldest first.
std::vector<std::string> last_checkpoints(const std::string& run_dir, int n);

}  // namespace cmha::train
