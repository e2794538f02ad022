#pragma once
// The IDX format of MNIST and Fashion-MNIST (LeCun et al.): a big-endian
// magic number 0x0000TTRR (T the element type code, R the rank), R big-endian
// uint32 sizes, then the elements in row-major order. Files may be gzip'd
// (as distributed) or plain; zlib reads both.
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace cmha::data {

// An IDX array of unsigned bytes (type code 0x08), as stored.
struct IdxBytes {
  std::vector<int64_t> dims;
  std::vector<uint8_t> values;
};

// Reads an unsigned-byte IDX file of rank `rank`. A missing, truncated,
// oversized or corrupt file, a wrong magic number, type code or rank is one
// cmha::Error sentence that names the file and what is wrong.
IdxBytes read_idx_u8(const std::string& path, int rank);

// Images [N, rows, cols] as f32 scaled to [0, 1] (byte / 255).
Tensor read_idx_images(const std::string& path);
// Labels [N] as i64.
Tensor read_idx_labels(const std::string& path);

struct LabelledImages {
  Tensor images;  // f32 [N, rows, cols] in [0, 1]
  Tensor labels;  // i64 [N]
};
// Both files of a split; a different count in each is an error naming both.
LabelledImages load_idx_split(const std::string& images_path, const std::string& labels_path);

// Writes an unsigned-byte IDX file, gzip'd when `gzip` (test data, samples).
void write_idx_u8(const std::string& path, const std::vector<int64_t>& dims, const std::vector<uint8_t>& values,
                  bool gzip);

}  // namespace cmha::data
