#pragma once
#include <string>

namespace cmha::test {

// FNV-1a over every tensor of a checkpoint (name, dtype, shape, bytes, in
// name order) and its trainer state, as hex; the stored recipe is left out:
// it holds the run's paths and device (as does an averaged checkpoint's
// trainer state, "averaged_from").
std::string checkpoint_hash(const std::string& path);

}  // namespace cmha::test
