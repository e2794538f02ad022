#pragma once
// Reads TensorBoard event files back (a reader independent of cmha's writer:
// its own TFRecord walk, CRC check and protobuf field decoding), for the tests.
#include <cstdint>
#include <string>
#include <vector>

namespace cmha::test {

struct TensorBoardScalar {
  double wall_time = 0;
  int64_t step = 0;
  std::string tag;
  float value = 0;
};

struct TensorBoardFile {
  std::string file_version;  // of the first record ("brain.Event:2")
  std::vector<TensorBoardScalar> scalars;
};

// Throws std::runtime_error on a truncated record, a CRC mismatch or a malformed proto.
TensorBoardFile read_tensorboard(const std::string& bytes);

}  // namespace cmha::test
