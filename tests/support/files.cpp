#include "support/files.h"

#include <fstream>
#include <iterator>

namespace cmha::test {

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(f, line)) lines.push_back(line);
  return lines;
}

std::string write_raw_safetensors(const std::string& path, const std::string& header, const std::string& data) {
  return write_raw_safetensors(path, header, data, header.size());
}

std::string write_raw_safetensors(const std::string& path, const std::string& header, const std::string& data,
                                  uint64_t declared_len) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>(declared_len >> (8 * i)));
  f << header << data;
  return path;
}

}  // namespace cmha::test
