#pragma once
// safetensors files (the format of Hugging Face and PyTorch tools): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype,
// shape and byte range, then the raw data.
#include <map>
#include <string>

#include "tensor/tensor.h"

namespace cmha {

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;           // CPU, contiguous
  std::map<std::string, std::string> metadata;     // the "__metadata__" entry
};

// Reads the whole file. Any defect (missing file, truncated data, bad JSON,
// unknown dtype, overlapping or out-of-range offsets) is a cmha::Error that
// names the file and, where it applies, the tensor.
SafetensorsFile load_safetensors(const std::string& path);

// Writes atomically: to a temporary name in the same folder, flushed, then
// renamed over `path`, so a crash never leaves a half-written file. The
// header is canonical: __metadata__ first, tensors in name order, each entry
// {dtype, shape, data_offsets}, compact JSON padded with spaces to 8 bytes.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace cmha
