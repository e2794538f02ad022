#pragma once
// Small file helpers shared by the tests.
#include <string>
#include <vector>

namespace cmha::test {

// Writes `bytes` to `path`, replacing it.
void write_file(const std::string& path, const std::string& bytes);
// The whole file as bytes ("" when it cannot be opened).
std::string read_file(const std::string& path);
// The file's lines without their '\n'.
std::vector<std::string> read_lines(const std::string& path);

}  // namespace cmha::test
