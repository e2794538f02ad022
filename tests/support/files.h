#pragma once
// Small file helpers shared by the tests.
#include <cstdint>
#include <string>
#include <vector>

namespace cmha::test {

// Writes `bytes` to `path`, replacing it.
void write_file(const std::string& path, const std::string& bytes);
// The whole file as bytes ("" when it cannot be opened).
std::string read_file(const std::string& path);
// The file's lines without their '\n'.
std::vector<std::string> read_lines(const std::string& path);

// A safetensors file written byte by byte: the header's length as 8
// little-endian bytes (`declared_len`, or the header's own length), the
// header, the data. Returns `path`.
std::string write_raw_safetensors(const std::string& path, const std::string& header, const std::string& data);
std::string write_raw_safetensors(const std::string& path, const std::string& header, const std::string& data,
                                  uint64_t declared_len);

}  // namespace cmha::test
